package objects

import (
	"bytes"
	"io"
	"math/rand"
	"testing"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; the f.Add seeds below
// cover the canonical encodings of the unit tests' samples.

func FuzzDecodeTree(f *testing.F) {
	for _, tr := range []*Tree{{}, sampleTree()} {
		b, err := tr.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(treeMagic))
	f.Add(rawTree(Entry{Name: "..", Type: TypeDir, ID: testID("x")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := DecodeTree(data)
		if err != nil {
			if tr != nil {
				t.Fatal("a tree returned with an error")
			}
			return
		}
		again, err := tr.Encode()
		if err != nil {
			t.Fatalf("decoded tree does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded tree re-encodes differently:\n in %x\nout %x", data, again)
		}
		for i, e := range tr.Entries {
			if !ValidName(e.Name) || (i > 0 && tr.Entries[i-1].Name >= e.Name) {
				t.Fatalf("decoded tree holds a bad or unordered name %q", e.Name)
			}
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	for _, c := range []*Commit{sampleCommit(), {Tree: testID("root")}} {
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(commitMagic + "{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommit(data)
		if err != nil {
			return
		}
		again, err := c.Encode()
		if err != nil {
			t.Fatalf("decoded commit does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded commit re-encodes differently:\n in %q\nout %q", data, again)
		}
		if c.Tree.IsZero() {
			t.Fatal("decoded commit without a tree")
		}
	})
}

func FuzzDecodeChunkList(f *testing.F) {
	f.Add(EncodeChunkList([]ChunkRef{{testID("a"), 1}, {testID("b"), MaxChunk}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		refs, err := DecodeChunkList(data)
		if err != nil {
			return
		}
		for _, r := range refs {
			if r.Size == 0 || r.Size > MaxChunk {
				t.Fatalf("decoded chunk size %d", r.Size)
			}
		}
		if again := EncodeChunkList(refs); !bytes.Equal(again, data) {
			t.Fatalf("chunk list re-encodes differently:\n in %x\nout %x", data, again)
		}
	})
}

// FuzzChunker checks that the chunker, fed through short reads, cuts
// exactly where Boundary cuts the whole buffer, within the size bounds.
// data is repeated to reach sizes above MaxChunk.
func FuzzChunker(f *testing.F) {
	f.Add([]byte("hello"), uint16(1), int64(1))
	f.Add(randBytes(1, 4096), uint16(200), int64(2))
	f.Add([]byte{0}, uint16(3000), int64(3))
	f.Fuzz(func(t *testing.T, data []byte, repeat uint16, seed int64) {
		whole := bytes.Repeat(data, int(repeat%2048)+1)
		if len(whole) > 3*MaxChunk {
			whole = whole[:3*MaxChunk]
		}
		want := splitAll(whole)
		for i, c := range want {
			if len(c) == 0 || len(c) > MaxChunk || (i < len(want)-1 && len(c) < MinChunk) {
				t.Fatalf("chunk %d of %d has %d bytes", i, len(want), len(c))
			}
		}
		r := &shortReader{whole, rand.New(rand.NewSource(seed)), 512 + int(uint64(seed)%70000)}
		c := NewChunker(r, nil)
		var got [][]byte
		for {
			b, err := c.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, append([]byte(nil), b...))
		}
		if !equalChunks(got, want) {
			t.Fatalf("chunker over short reads gives %d chunks, Boundary %d", len(got), len(want))
		}
	})
}
