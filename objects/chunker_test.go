package objects

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"
	"testing/iotest"
)

// randBytes returns n pseudo-random bytes from a fixed seed.
func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// splitAll cuts data with Boundary, as if it were one whole stream.
func splitAll(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := Boundary(data)
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// readAll cuts the stream r with a Chunker, copying each chunk.
func readAll(t testing.TB, r io.Reader, buf []byte) [][]byte {
	t.Helper()
	c := NewChunker(r, buf)
	var out [][]byte
	for {
		b, err := c.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, append([]byte(nil), b...))
	}
}

type span struct {
	id       ID
	off, len int
}

func spans(chunks [][]byte) []span {
	var out []span
	off := 0
	for _, c := range chunks {
		out = append(out, span{Hash(c), off, len(c)})
		off += len(c)
	}
	return out
}

func checkSizes(t *testing.T, chunks [][]byte) {
	t.Helper()
	for i, c := range chunks {
		last := i == len(chunks)-1
		if len(c) == 0 || len(c) > MaxChunk || (!last && len(c) < MinChunk) {
			t.Errorf("chunk %d/%d has %d bytes, want %d..%d", i, len(chunks), len(c), MinChunk, MaxChunk)
		}
	}
}

func TestChunkBoundariesStableUnderEdits(t *testing.T) {
	orig := randBytes(1, 4<<20)
	origSpans := spans(splitAll(orig))
	origIDs := map[ID]bool{}
	for _, s := range origSpans {
		origIDs[s.id] = true
	}
	mid := len(orig) / 2
	tests := []struct {
		name string
		edit func([]byte) []byte
		at   int // where the edit starts
		diff int // bytes added (negative: removed) at `at`
	}{
		{"insert 1 byte", func(b []byte) []byte { return splice(b, mid, 0, []byte{0x42}) }, mid, 1},
		{"insert 100 bytes", func(b []byte) []byte { return splice(b, mid, 0, randBytes(2, 100)) }, mid, 100},
		{"insert 1 MiB", func(b []byte) []byte { return splice(b, mid, 0, randBytes(3, 1<<20)) }, mid, 1 << 20},
		{"delete 10 bytes", func(b []byte) []byte { return splice(b, mid, 10, nil) }, mid, -10},
		{"overwrite 1 byte", func(b []byte) []byte { c := splice(b, 0, 0, nil); c[mid] ^= 0xff; return c }, mid, 0},
		{"insert at start", func(b []byte) []byte { return splice(b, 0, 0, []byte("hello")) }, 0, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			edited := tc.edit(orig)
			chunks := splitAll(edited)
			checkSizes(t, chunks)
			if !bytes.Equal(bytes.Join(chunks, nil), edited) {
				t.Fatal("chunks do not concatenate to the data")
			}
			newSpans := spans(chunks)
			// Every chunk that ends before the edit is unchanged, in place.
			for i, s := range origSpans {
				if s.off+s.len > tc.at {
					break
				}
				if i >= len(newSpans) || newSpans[i] != s {
					t.Fatalf("chunk %d (offset %d) before the edit at %d changed", i, s.off, tc.at)
				}
			}
			// Cuts resynchronise soon after the edit: every chunk starting
			// 2*MaxChunk past the edited region is an old chunk, and only
			// a handful of chunks are new.
			fresh := 0
			for _, s := range newSpans {
				if origIDs[s.id] {
					continue
				}
				fresh++
				end := tc.at + max(tc.diff, 0) + 2*MaxChunk
				if s.off > end {
					t.Errorf("new chunk at offset %d, far after the edit at %d", s.off, tc.at)
				}
			}
			limit := 4 + max(tc.diff, 0)/MinChunk
			if fresh > limit {
				t.Errorf("%d new chunks after a %d-byte edit, want <= %d", fresh, tc.diff, limit)
			}
		})
	}
}

func splice(b []byte, at, del int, ins []byte) []byte {
	out := make([]byte, 0, len(b)+len(ins))
	out = append(out, b[:at]...)
	out = append(out, ins...)
	return append(out, b[at+del:]...)
}

func TestChunkSizeDistribution(t *testing.T) {
	for _, seed := range []int64{1, 7} {
		data := randBytes(seed, 4<<20)
		chunks := splitAll(data)
		checkSizes(t, chunks)
		avg := len(data) / len(chunks)
		if avg < AvgChunk*3/4 || avg > AvgChunk*3/2 {
			t.Errorf("seed %d: average chunk %d bytes over %d chunks, want near %d", seed, avg, len(chunks), AvgChunk)
		}
	}
	// Data without content-defined cut points (all zero) is cut at MaxChunk.
	zero := make([]byte, 3*MaxChunk+5)
	chunks := splitAll(zero)
	if len(chunks) != 4 || len(chunks[0]) != MaxChunk || len(chunks[3]) != 5 {
		t.Errorf("zero data: %d chunks, first %d bytes", len(chunks), len(chunks[0]))
	}
}

func TestSmallFileIsOneChunk(t *testing.T) {
	for _, n := range []int{1, 2, 100, 4096, MinChunk - 1, MinChunk} {
		data := randBytes(int64(n), n)
		if got := Boundary(data); got != n {
			t.Errorf("Boundary of %d bytes = %d, want the whole", n, got)
		}
		chunks := readAll(t, bytes.NewReader(data), nil)
		if len(chunks) != 1 || !bytes.Equal(chunks[0], data) {
			t.Errorf("%d bytes: %d chunks, want 1", n, len(chunks))
		}
	}
	if chunks := readAll(t, bytes.NewReader(nil), nil); len(chunks) != 0 {
		t.Errorf("empty stream: %d chunks, want none", len(chunks))
	}
	if got := Boundary(nil); got != 0 {
		t.Errorf("Boundary(nil) = %d", got)
	}
}

// shortReader returns at most a few random bytes per Read, sometimes none.
type shortReader struct {
	data []byte
	rnd  *rand.Rand
	max  int
}

func (r *shortReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := r.rnd.Intn(r.max + 1) // 0 is allowed: (0, nil) is a legal short read
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func TestChunkerShortReadsMatchBoundary(t *testing.T) {
	data := randBytes(5, 3<<20+12345)
	want := splitAll(data)
	readers := []struct {
		name string
		r    func() io.Reader
		buf  []byte
	}{
		{"whole", func() io.Reader { return bytes.NewReader(data) }, nil},
		{"short reads up to 7000", func() io.Reader { return &shortReader{data, rand.New(rand.NewSource(1)), 7000} }, nil},
		{"short reads up to 300", func() io.Reader { return &shortReader{data, rand.New(rand.NewSource(2)), 300} }, nil},
		{"half reader", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }, nil},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) }, nil},
		{"pooled buffer", func() io.Reader { return bytes.NewReader(data) }, make([]byte, 2*MaxChunk+100)},
		{"too small buffer", func() io.Reader { return bytes.NewReader(data) }, make([]byte, 10)},
	}
	for _, tc := range readers {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(t, tc.r(), tc.buf)
			if len(got) != len(want) {
				t.Fatalf("%d chunks, want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("chunk %d differs (%d vs %d bytes)", i, len(got[i]), len(want[i]))
				}
			}
		})
	}
	// A byte-at-a-time reader on a smaller stream.
	small := data[:600<<10]
	got := readAll(t, iotest.OneByteReader(bytes.NewReader(small)), nil)
	if !equalChunks(got, splitAll(small)) {
		t.Error("one-byte reader: chunks differ from Boundary")
	}
}

func equalChunks(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestChunkerReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(randBytes(9, 100)), iotest.ErrReader(boom))
	c := NewChunker(r, nil)
	if _, err := c.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next = %v, want the read error", err)
	}
}

// Runs of zeros are cut without the hash (Boundary's shortcut); the cuts
// must be those of the hash, or the chunk ids of zero-filled files would
// depend on the version of art that stored them.
func TestZeroRunsCutAsHashed(t *testing.T) {
	rnd := randBytes(9, 3*MaxChunk)
	withByte := func(n, at int) []byte {
		b := make([]byte, n)
		b[at] = 1
		return b
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"zeros, MaxChunk", make([]byte, MaxChunk)},
		{"zeros, 3 MaxChunk + 5", make([]byte, 3*MaxChunk+5)},
		{"zeros, MinChunk + 1", make([]byte, MinChunk+1)},
		{"zeros, 100", make([]byte, 100)},
		{"a byte at MaxChunk-1", withByte(2*MaxChunk, MaxChunk-1)},
		{"a byte at MaxChunk", withByte(2*MaxChunk, MaxChunk)},
		{"a byte at MinChunk", withByte(2*MaxChunk, MinChunk)},
		{"data, then zeros", append(append([]byte(nil), rnd[:MaxChunk+777]...), make([]byte, 5*MaxChunk)...)},
		{"zeros, then data", append(make([]byte, 5*MaxChunk+333), rnd...)},
	}
	for _, c := range cases {
		var want [][]byte
		for d := c.data; len(d) > 0; {
			n := boundary(d)
			want = append(want, d[:n])
			d = d[n:]
		}
		if got := splitAll(c.data); !equalChunks(got, want) {
			t.Errorf("%s: %d chunks, want %d as the hash cuts them", c.name, len(got), len(want))
		}
	}
	if got := boundary(make([]byte, MaxChunk)); got != zeroCut {
		t.Errorf("the hash cuts MaxChunk zeros at %d, zeroCut says %d", got, zeroCut)
	}
	// A run of zeros inside data is stored as ZeroChunk chunks, which the
	// overlay reports as holes.
	d := append(append([]byte("head"), make([]byte, 4*MaxChunk)...), "tail"...)
	zero := 0
	for _, c := range splitAll(d) {
		if Hash(c) == ZeroChunk() {
			zero++
		}
	}
	if zero != 3 {
		t.Errorf("%d ZeroChunk chunks in a run of 4×MaxChunk zeros between data, want 3", zero)
	}
}

func TestIsZero(t *testing.T) {
	for _, n := range []int{0, 1, 7, MaxChunk, MaxChunk + 1, 3*MaxChunk + 9} {
		b := make([]byte, n)
		if !IsZero(b) {
			t.Errorf("%d zero bytes: not zero", n)
		}
		if n > 0 {
			b[n-1] = 1
			if IsZero(b) {
				t.Errorf("%d bytes ending in 1: zero", n)
			}
		}
	}
}

func TestTrimZeros(t *testing.T) {
	// Each case: a length, and where non-zero bytes sit (-1: none). The
	// result must be what bytes.TrimRight gives, at every stretch boundary.
	for _, tc := range []struct {
		n    int
		ones []int
	}{
		{0, nil}, {1, nil}, {1, []int{0}}, {255, nil}, {256, nil}, {257, []int{0}},
		{256, []int{255}}, {512, []int{255}}, {512, []int{256}}, {513, []int{256}},
		{64 << 10, nil}, {64 << 10, []int{0}}, {64 << 10, []int{100, 40000}},
		{64 << 10, []int{64<<10 - 1}}, {64<<10 + 3, []int{64 << 10}},
	} {
		b := make([]byte, tc.n)
		for _, i := range tc.ones {
			b[i] = 1
		}
		got, want := TrimZeros(b), bytes.TrimRight(b, "\x00")
		if len(got) != len(want) || (len(got) > 0 && &got[0] != &b[0]) {
			t.Errorf("n=%d ones=%v: trimmed to %d bytes, want %d of the same slice", tc.n, tc.ones, len(got), len(want))
		}
	}
}

// BenchmarkTrimZeros is the overlay's trim of a stored block that holds
// only zeros (a dd of /dev/zero, a preallocated file).
func BenchmarkTrimZeros(b *testing.B) {
	blk := make([]byte, 64<<10)
	b.SetBytes(int64(len(blk)))
	for b.Loop() {
		if len(TrimZeros(blk)) != 0 {
			b.Fatal("not trimmed")
		}
	}
}
