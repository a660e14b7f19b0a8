package objects

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Chunk size bounds of the content-defined chunker. They are part of the
// repository format: changing them changes chunk ids of new data (old data
// stays readable, it just deduplicates less against new writes).
const (
	MinChunk = 16 << 10  // no cut before this many bytes
	AvgChunk = 64 << 10  // expected chunk size
	MaxChunk = 256 << 10 // a cut is forced here
)

// FastCDC masks with normalization level 2: harder to cut before AvgChunk
// (18 one-bits), easier after it (14 one-bits), which narrows the size
// distribution around AvgChunk. The gear hash shifts left, so its high bits
// carry the most recent 64 bytes; the masks test high bits.
const (
	maskSmall uint64 = ((1 << 18) - 1) << (64 - 18)
	maskLarge uint64 = ((1 << 14) - 1) << (64 - 14)
)

// gear is the 256-entry random table of the gear rolling hash. It is
// generated from a fixed seed with splitmix64 so that it is reproducible
// from docs/format.md alone.
var gear = func() [256]uint64 {
	var t [256]uint64
	x := uint64(0x61727463686e6b31) // "artchnk1"
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		t[i] = z ^ (z >> 31)
	}
	return t
}()

// Boundary returns the length of the first chunk of data. data holds the
// rest of the stream, or at least MaxChunk bytes of it; the cut depends only
// on the bytes, so an insertion early in a file moves only the nearby cuts.
func Boundary(data []byte) int {
	if len(data) >= MaxChunk && IsZero(data[:MaxChunk]) {
		return zeroCut
	}
	return boundary(data)
}

// zeroCut is where boundary cuts MaxChunk zero bytes (a test checks it).
// The gear hash of a run of zeros settles after 64 bytes, on a value the
// masks never cut, so every such run is cut at MaxChunk, and Boundary
// answers it without hashing: holes and zero-filled files (disk images,
// preallocated files) cost a comparison, not a pass of the hash. A
// constant, not computed at start-up, which every command pays.
const zeroCut = MaxChunk

// zeros is a run of zero bytes to compare against.
var zeros [MaxChunk]byte

// ZeroChunk is the id of MaxChunk zero bytes, the chunk every run of zeros
// in a file is cut into (zeroCut): where a stored file has one, it had a
// hole, or zeros, which read the same. Computed on first use, not at
// start-up.
var ZeroChunk = sync.OnceValue(func() ID { return Hash(zeros[:]) })

// IsZero reports whether b holds only zero bytes.
func IsZero(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), len(zeros))
		if !bytes.Equal(b[:k], zeros[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// TrimZeros returns b without its trailing zero bytes. It compares the
// tail a stretch at a time (bytes.Equal is vectorised): the overlay trims
// every block it stores, and bytes.TrimRight's byte-at-a-time loop was
// 44 % of art's CPU time writing a 1 GiB file of zeros.
func TrimZeros(b []byte) []byte {
	const step = 256
	for len(b) >= step && bytes.Equal(b[len(b)-step:], zeros[:step]) {
		b = b[:len(b)-step]
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// boundary is Boundary by the gear hash alone.
func boundary(data []byte) int {
	n := len(data)
	if n <= MinChunk {
		return n
	}
	if n > MaxChunk {
		n = MaxChunk
	}
	normal := AvgChunk
	if n < normal {
		normal = n
	}
	var h uint64
	i := MinChunk
	for ; i < normal; i++ {
		h = (h << 1) + gear[data[i]]
		if h&maskSmall == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		h = (h << 1) + gear[data[i]]
		if h&maskLarge == 0 {
			return i + 1
		}
	}
	return n
}

// Chunker splits a stream into content-defined chunks.
type Chunker struct {
	r   io.Reader
	buf []byte
	beg int // start of unconsumed data in buf
	end int // end of valid data in buf
	eof bool
}

// NewChunker returns a chunker reading r. buf, if large enough
// (>= 2*MaxChunk), is used as its buffer so callers can pool them.
func NewChunker(r io.Reader, buf []byte) *Chunker {
	if cap(buf) < 2*MaxChunk {
		buf = make([]byte, 2*MaxChunk)
	}
	return &Chunker{r: r, buf: buf[:cap(buf)]}
}

// Next returns the next chunk, valid until the following call, or io.EOF
// after the last one. An empty stream yields no chunks.
func (c *Chunker) Next() ([]byte, error) {
	if c.end-c.beg < MaxChunk && !c.eof {
		if c.beg > 0 {
			c.end = copy(c.buf, c.buf[c.beg:c.end])
			c.beg = 0
		}
		for c.end < len(c.buf) && !c.eof {
			n, err := c.r.Read(c.buf[c.end:])
			c.end += n
			if errors.Is(err, io.EOF) {
				c.eof = true
			} else if err != nil {
				return nil, err
			}
			if n == 0 && err == nil && c.end-c.beg >= MaxChunk {
				break
			}
		}
	}
	if c.beg == c.end {
		return nil, io.EOF
	}
	n := Boundary(c.buf[c.beg:c.end])
	chunk := c.buf[c.beg : c.beg+n]
	c.beg += n
	return chunk, nil
}
