package objects

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// memLoader is an in-memory Loader holding chunks and chunk lists, with
// the same hash verification the repository does.
type memLoader struct {
	chunks map[ID][]byte
	files  map[ID][]ChunkRef
	loads  int
}

func (m *memLoader) LoadChunk(id ID) ([]byte, error) {
	m.loads++
	b, ok := m.chunks[id]
	if !ok {
		return nil, fmt.Errorf("chunk %s: %w", id.Short(), ErrNotFound)
	}
	if Hash(b) != id {
		return nil, fmt.Errorf("chunk %s: %w", id.Short(), ErrCorrupt)
	}
	return b, nil
}

func (m *memLoader) LoadFileChunks(id ID) ([]ChunkRef, error) {
	if refs, ok := m.files[id]; ok {
		return refs, nil
	}
	if b, ok := m.chunks[id]; ok {
		return []ChunkRef{{ID: id, Size: uint32(len(b))}}, nil
	}
	return nil, ErrNotFound
}
func (m *memLoader) LoadTree(ID) (*Tree, error)     { return nil, ErrNotFound }
func (m *memLoader) LoadCommit(ID) (*Commit, error) { return nil, ErrNotFound }

// store chunks data into m and returns the file id.
func (m *memLoader) store(t *testing.T, data []byte) ID {
	t.Helper()
	if m.chunks == nil {
		m.chunks, m.files = map[ID][]byte{}, map[ID][]ChunkRef{}
	}
	var refs []ChunkRef
	for _, c := range readAll(t, bytes.NewReader(data), nil) {
		id := Hash(c)
		m.chunks[id] = c
		refs = append(refs, ChunkRef{ID: id, Size: uint32(len(c))})
	}
	if len(refs) == 1 {
		return refs[0].ID
	}
	id := Hash(data)
	m.files[id] = refs
	return id
}

func TestChunkListRoundTrip(t *testing.T) {
	refs := []ChunkRef{{testID("a"), 1}, {testID("b"), 127}, {testID("c"), 128}, {testID("d"), MaxChunk}}
	b := EncodeChunkList(refs)
	got, err := DecodeChunkList(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(refs) {
		t.Fatalf("got %v, want %v", got, refs)
	}
	if got, err := DecodeChunkList(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v %v", got, err)
	}
	id := testID("x")
	entry := func(size ...byte) []byte { return append(append([]byte(nil), id[:]...), size...) }
	for name, data := range map[string][]byte{
		"size zero":          entry(0),
		"size above max":     binary.AppendUvarint(append([]byte(nil), id[:]...), MaxChunk+1),
		"non-minimal varint": entry(0x81, 0x00),
		"truncated varint":   entry(0x81),
		"short id":           id[:10],
		"trailing byte":      append(EncodeChunkList(refs), 1),
	} {
		if _, err := DecodeChunkList(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error %v, want ErrCorrupt", name, err)
		}
	}
}

func TestFileReaderAtChunkEdges(t *testing.T) {
	data := randBytes(11, 1<<20+333)
	m := &memLoader{}
	id := m.store(t, data)
	fr, err := NewFileReader(m, id, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	refs, starts := fr.Chunks()
	if len(refs) < 3 {
		t.Fatalf("want a multi-chunk file, got %d chunks", len(refs))
	}
	if fr.Size() != int64(len(data)) || starts[len(refs)] != int64(len(data)) {
		t.Fatal("bad size")
	}
	type read struct{ off, n int64 }
	var reads []read
	for _, s := range starts[1:len(refs)] {
		for _, d := range []int64{-1, 0, 1} {
			for _, n := range []int64{1, 2, 100, MaxChunk + 7} {
				reads = append(reads, read{s + d, n})
			}
		}
	}
	size := int64(len(data))
	reads = append(reads, read{0, size}, read{0, size + 10}, read{size - 1, 5}, read{size, 1}, read{size + 5, 1}, read{3, 0})
	for _, r := range reads {
		p := make([]byte, r.n)
		n, err := fr.ReadAt(p, r.off)
		wantN := max(min(r.n, size-r.off), 0)
		if int64(n) != wantN {
			t.Fatalf("ReadAt(%d, off %d) = %d bytes, want %d (%v)", r.n, r.off, n, wantN, err)
		}
		if wantN < r.n && err != io.EOF {
			t.Fatalf("ReadAt(%d, off %d) short read without io.EOF: %v", r.n, r.off, err)
		}
		if wantN == r.n && err != nil && r.off < size {
			t.Fatalf("ReadAt(%d, off %d): %v", r.n, r.off, err)
		}
		if !bytes.Equal(p[:n], data[min(r.off, size):min(r.off, size)+int64(n)]) {
			t.Fatalf("ReadAt(%d, off %d) returned wrong bytes", r.n, r.off)
		}
	}
	// A read inside one chunk loads only that chunk.
	m.loads = 0
	if _, err := fr.ReadAt(make([]byte, 10), starts[1]+5); err != nil || m.loads != 1 {
		t.Fatalf("read inside chunk 1 loaded %d chunks (%v)", m.loads, err)
	}
	// Sequential Read gives the whole content.
	all, err := io.ReadAll(fr)
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("ReadAll: %d bytes, %v", len(all), err)
	}
}

// Regression: a negative offset used to panic with an index out of range.
func TestFileReaderNegativeOffset(t *testing.T) {
	m := &memLoader{}
	data := []byte("hello")
	fr, err := NewFileReader(m, m.store(t, data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := fr.ReadAt(make([]byte, 3), -1); err == nil || n != 0 {
		t.Fatalf("ReadAt(-1) = %d, %v; want an error", n, err)
	}
}

func TestFileReaderEmptyAndCorrupt(t *testing.T) {
	m := &memLoader{}
	fr, err := NewFileReader(m, Hash(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := fr.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("empty file Read = %d, %v", n, err)
	}
	data := randBytes(12, 300<<10)
	id := m.store(t, data)
	// The size recorded in the tree disagrees with the chunks.
	if _, err := NewFileReader(m, id, int64(len(data))+1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("size mismatch: %v, want ErrCorrupt", err)
	}
	// A chunk list whose sizes disagree with the stored chunk.
	refs := append([]ChunkRef(nil), m.files[id]...)
	refs[0].Size--
	refs[1].Size++
	m.files[id] = refs
	fr, err = NewFileReader(m, id, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fr.ReadAt(make([]byte, 10), 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("chunk size mismatch: %v, want ErrCorrupt", err)
	}
	// A damaged chunk is an error, never wrong data.
	refs[0].Size++
	refs[1].Size--
	fr, err = NewFileReader(m, id, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	m.chunks[refs[0].ID][0] ^= 1
	if _, err := io.ReadAll(fr); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged chunk: %v, want ErrCorrupt", err)
	}
	// A missing file.
	if _, err := NewFileReader(m, testID("missing"), 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// TestFileReaderReorderedChunks: a chunk list naming the file's own valid
// chunks in another order passes every chunk's check; a read of the whole
// file must still fail, however the caller reads, never give wrong data.
func TestFileReaderReorderedChunks(t *testing.T) {
	data := randBytes(13, 4*MaxChunk) // a multiple of 64 KiB: io.ReadFull's last read ends exactly at the end
	m := &memLoader{}
	id := m.store(t, data)
	refs := append([]ChunkRef(nil), m.files[id]...)
	if len(refs) < 2 {
		t.Fatalf("want a multi-chunk file, got %d chunks", len(refs))
	}
	good := refs
	bad := append([]ChunkRef(nil), refs...)
	bad[0], bad[1] = bad[1], bad[0]
	for _, tc := range []struct {
		name string
		read func(fr *FileReader) error
	}{
		{"ReadAll", func(fr *FileReader) error { _, err := io.ReadAll(fr); return err }},
		{"ReadFull of the size", func(fr *FileReader) error { _, err := io.ReadFull(fr, make([]byte, len(data))); return err }},
		{"ReadFull in 64 KiB pieces", func(fr *FileReader) error {
			buf := make([]byte, 64<<10)
			for {
				_, err := io.ReadFull(fr, buf)
				if err == io.EOF {
					return nil
				}
				if err != nil && err != io.ErrUnexpectedEOF {
					return err
				}
			}
		}},
		{"Copy", func(fr *FileReader) error { _, err := io.Copy(io.Discard, fr); return err }},
	} {
		for _, list := range [][]ChunkRef{good, bad} {
			m.files[id] = list
			fr, err := NewFileReader(m, id, int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.read(fr)
			if reordered := &list[0] == &bad[0]; reordered && !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s of a reordered chunk list: %v, want ErrCorrupt", tc.name, err)
			} else if !reordered && err != nil {
				t.Errorf("%s of the sound file: %v", tc.name, err)
			}
		}
	}
	// Random access verifies the chunks it touches only (a mount's reads).
	m.files[id] = bad
	fr, _ := NewFileReader(m, id, int64(len(data)))
	if _, err := fr.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
}

func TestCompress(t *testing.T) {
	text := []byte(strings.Repeat("all work and no play makes jack a dull boy\n", 500))
	tests := []struct {
		name    string
		data    []byte
		wantEnc int
	}{
		{"empty", nil, EncRaw},
		{"tiny", []byte("hello"), EncRaw},
		{"63 compressible bytes", bytes.Repeat([]byte{'a'}, 63), EncRaw},
		{"text", text, EncZstd},
		{"random", randBytes(3, 100<<10), EncRaw},
		{"zeros", make([]byte, MaxChunk), EncZstd},
	}
	for _, tc := range tests {
		for fname, compress := range map[string]func([]byte) ([]byte, int){"Compress": Compress, "CompressSmall": CompressSmall} {
			t.Run(fname+"/"+tc.name, func(t *testing.T) {
				c, enc := compress(tc.data)
				if enc != tc.wantEnc {
					t.Fatalf("encoding %d, want %d", enc, tc.wantEnc)
				}
				if enc == EncZstd && len(c) >= len(tc.data) {
					t.Fatalf("compressed %d bytes to %d", len(tc.data), len(c))
				}
				back, err := Decompress(c, enc, len(tc.data))
				if err != nil || !bytes.Equal(back, tc.data) {
					t.Fatalf("Decompress: %v", err)
				}
			})
		}
	}
	c, _ := Compress(text)
	bad := append([]byte(nil), c...)
	bad[len(bad)/2] ^= 0xff
	bad[len(bad)-1] ^= 0xff
	for name, f := range map[string]func() error{
		"garbage zstd":     func() error { _, err := Decompress([]byte("not zstd at all"), EncZstd, 10); return err },
		"damaged zstd":     func() error { _, err := Decompress(bad, EncZstd, len(text)); return err },
		"unknown encoding": func() error { _, err := Decompress(c, 7, len(text)); return err },
	} {
		if err := f(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestIDs(t *testing.T) {
	id := Hash([]byte("abc"))
	// BLAKE3-256 of "abc", from the reference test vectors.
	const abc = "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
	if id.String() != abc || id.Short() != abc[:12] {
		t.Fatalf("Hash(abc) = %s", id)
	}
	if got, err := ParseID(abc); err != nil || got != id {
		t.Fatalf("ParseID: %v", err)
	}
	for _, s := range []string{"", abc[:63], abc + "0", strings.ToUpper(abc), "g" + abc[1:], " " + abc[1:]} {
		if _, err := ParseID(s); !errors.Is(err, ErrBadID) {
			t.Errorf("ParseID(%q) = %v, want ErrBadID", s, err)
		}
	}
	j, err := json.Marshal(struct{ ID ID }{id})
	if err != nil || string(j) != `{"ID":"`+abc+`"}` {
		t.Fatalf("JSON: %s %v", j, err)
	}
	var back struct{ ID ID }
	if err := json.Unmarshal(j, &back); err != nil || back.ID != id {
		t.Fatalf("JSON back: %v", err)
	}
	if _, err := FromBytes(id[:31]); err == nil {
		t.Error("FromBytes accepted 31 bytes")
	}
	if got, err := FromBytes(id[:]); err != nil || got != id {
		t.Error("FromBytes failed")
	}
	h := NewHasher()
	h.Write([]byte("a"))
	h.Write([]byte("bc"))
	if h.Sum() != id {
		t.Error("streaming hash differs")
	}
	h.Reset()
	if h.Sum() != Hash(nil) {
		t.Error("Reset hasher differs from the empty hash")
	}
	if !Zero.IsZero() || id.IsZero() {
		t.Error("IsZero")
	}
}
