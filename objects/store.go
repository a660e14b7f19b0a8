package objects

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
)

// ChunkRef is one piece of a file's content.
type ChunkRef struct {
	ID   ID
	Size uint32
}

// Loader reads verified objects. The repository implements it; the overlay
// and the file reader below need nothing else. Every method verifies the
// hash of what it returns: corruption is an error wrapping ErrCorrupt,
// never wrong data.
type Loader interface {
	LoadChunk(id ID) ([]byte, error)
	// LoadFileChunks returns the chunks of a file's content in order. A
	// file that is a single chunk returns one ref with the file's own id.
	LoadFileChunks(id ID) ([]ChunkRef, error)
	LoadTree(id ID) (*Tree, error)
	LoadCommit(id ID) (*Commit, error)
}

// EncodeChunkList encodes the chunk list of a multi-chunk file.
func EncodeChunkList(refs []ChunkRef) []byte {
	b := make([]byte, 0, len(refs)*(IDSize+3))
	for _, r := range refs {
		b = append(b, r.ID[:]...)
		b = binary.AppendUvarint(b, uint64(r.Size))
	}
	return b
}

// DecodeChunkList parses EncodeChunkList's output strictly.
func DecodeChunkList(b []byte) ([]ChunkRef, error) {
	var refs []ChunkRef
	for len(b) > 0 {
		if len(b) < IDSize+1 {
			return nil, fmt.Errorf("decode chunk list: %w", ErrCorrupt)
		}
		var r ChunkRef
		copy(r.ID[:], b)
		b = b[IDSize:]
		v, n := binary.Uvarint(b)
		if n <= 0 || v == 0 || v > MaxChunk || n != len(binary.AppendUvarint(nil, v)) {
			return nil, fmt.Errorf("decode chunk list: %w", ErrCorrupt)
		}
		r.Size = uint32(v)
		b = b[n:]
		refs = append(refs, r)
	}
	return refs, nil
}

// FileReader reads a stored file's content at any offset, loading only the
// chunks it touches.
//
// Every chunk is verified as it is loaded, but a chunk list (the files
// table) is not an object of its own: a list damaged into other valid
// chunks of the right sizes, reordered say, reads as wrong data. Read
// from start to end therefore hashes the whole content and ends with
// ErrCorrupt, not io.EOF, when it is not the file's id (pull, diff);
// ReadAt, which a mount uses, verifies the chunks it touches only.
type FileReader struct {
	l      Loader
	id     ID
	refs   []ChunkRef
	starts []int64 // starts[i] is the offset of refs[i]; starts[len] = size
	off    int64   // for Read
	// For Read: the running hash of bytes [0, off); nil for one chunk
	// (its load verifies it against the file's id) and once checked.
	whole *Hasher
	bad   error // the content is not the file's: every Read fails
}

// NewFileReader returns a reader for the file id of the given size.
func NewFileReader(l Loader, id ID, size int64) (*FileReader, error) {
	fr := &FileReader{l: l}
	if size == 0 {
		fr.starts = []int64{0}
		return fr, nil
	}
	refs, err := l.LoadFileChunks(id)
	if err != nil {
		return nil, err
	}
	fr.refs = refs
	fr.starts = make([]int64, len(refs)+1)
	var off int64
	for i, r := range refs {
		fr.starts[i] = off
		off += int64(r.Size)
	}
	fr.starts[len(refs)] = off
	if off != size {
		return nil, fmt.Errorf("file %s: chunks hold %d bytes, tree says %d: %w", id.Short(), off, size, ErrCorrupt)
	}
	fr.verifyWhole(id)
	return fr, nil
}

// verifyWhole makes sequential reads hash a multi-chunk file's content.
func (fr *FileReader) verifyWhole(id ID) {
	fr.id = id
	if len(fr.refs) > 1 {
		fr.whole = NewHasher()
	}
}

// OpenFile returns a reader for a stored file whose size the caller does
// not know; the size is the sum of its chunks.
func OpenFile(l Loader, id ID) (*FileReader, error) {
	refs, err := l.LoadFileChunks(id)
	if err != nil {
		return nil, err
	}
	var size int64
	for _, r := range refs {
		size += int64(r.Size)
	}
	fr := &FileReader{l: l, refs: refs, starts: make([]int64, len(refs)+1)}
	var off int64
	for i, r := range refs {
		fr.starts[i] = off
		off += int64(r.Size)
	}
	fr.starts[len(refs)] = size
	fr.verifyWhole(id)
	return fr, nil
}

// Size returns the content length.
func (fr *FileReader) Size() int64 { return fr.starts[len(fr.starts)-1] }

// Chunks returns the chunk list with each chunk's offset.
func (fr *FileReader) Chunks() ([]ChunkRef, []int64) { return fr.refs, fr.starts }

// ReadAt implements io.ReaderAt.
func (fr *FileReader) ReadAt(p []byte, off int64) (int, error) {
	size := fr.Size()
	if off < 0 {
		return 0, fmt.Errorf("read at offset %d: negative offset", off)
	}
	if off >= size {
		return 0, io.EOF
	}
	i := sort.Search(len(fr.refs), func(i int) bool { return fr.starts[i+1] > off })
	n := 0
	for n < len(p) && i < len(fr.refs) {
		data, err := fr.l.LoadChunk(fr.refs[i].ID)
		if err != nil {
			return n, err
		}
		if len(data) != int(fr.refs[i].Size) {
			return n, fmt.Errorf("chunk %s: %d bytes, list says %d: %w", fr.refs[i].ID.Short(), len(data), fr.refs[i].Size, ErrCorrupt)
		}
		c := copy(p[n:], data[off+int64(n)-fr.starts[i]:])
		n += c
		i++
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read implements io.Reader. When the content read from the start is not
// the file's, the read that would reach the end fails with ErrCorrupt,
// delivering nothing (io.ReadFull drops an error that comes with the
// bytes it asked for), and so does every read after it.
func (fr *FileReader) Read(p []byte) (int, error) {
	if fr.bad != nil {
		return 0, fr.bad
	}
	n, err := fr.ReadAt(p, fr.off)
	if fr.whole != nil {
		fr.whole.Write(p[:n])
		if fr.off+int64(n) == fr.Size() {
			sum := fr.whole.Sum()
			fr.whole = nil // checked once
			if sum != fr.id {
				fr.bad = fmt.Errorf("file %s: its chunks, in the order its chunk list gives, are other content: %w", fr.id.Short(), ErrCorrupt)
				return 0, fr.bad
			}
		}
	}
	fr.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}
