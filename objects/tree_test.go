package objects

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func testID(s string) ID { return Hash([]byte(s)) }

// sampleTree holds every entry type, xattrs and awkward names.
func sampleTree() *Tree {
	t := &Tree{Entries: []Entry{
		{Name: "\xff\xfe not utf-8", Type: TypeFile, Mode: 0o644, ID: testID("bad"), Size: 3, MTime: 1},
		{Name: " spaced name ", Type: TypeFile, Mode: 0o600, ID: testID("space"), Size: 0, MTime: -5},
		{Name: "a.go", Type: TypeFile, Mode: 0o755, ID: testID("a"), Size: 1 << 40, MTime: 1700000000123456789,
			Xattrs: []Xattr{{Name: "user.a", Value: []byte("1")}, {Name: "user.b", Value: []byte{0, 1, 2}}}},
		{Name: "dir", Type: TypeDir, Mode: 0o750, ID: testID("dir"), MTime: 42},
		{Name: "fifo", Type: TypeFifo, Mode: 0o640, MTime: 7},
		{Name: "line\nbreak", Type: TypeFile, Mode: 0o4755, ID: testID("nl"), Size: 9},
		{Name: "link", Type: TypeSymlink, Mode: 0o777, Target: "../../etc/passwd", Size: 16, MTime: 3,
			Xattrs: []Xattr{{Name: "trusted.x", Value: bytes.Repeat([]byte{'v'}, 1000)}}},
		{Name: strings.Repeat("n", MaxNameLen), Type: TypeSymlink, Mode: 0o777, Target: "/abs", Size: 4},
		{Name: "sticky", Type: TypeDir, Mode: 0o1777, ID: testID("sticky")},
	}}
	t.Sort()
	return t
}

func TestTreeRoundTrip(t *testing.T) {
	for _, tr := range []*Tree{{}, sampleTree()} {
		b, id, err := EncodeTree(tr)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if id != Hash(b) {
			t.Fatal("id is not the hash of the encoding")
		}
		got, err := DecodeTree(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(tr.Entries) == 0 {
			if len(got.Entries) != 0 {
				t.Fatal("empty tree decoded with entries")
			}
			continue
		}
		if !reflect.DeepEqual(got, tr) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, tr)
		}
		again, err := got.Encode()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
		for _, e := range tr.Entries {
			f, ok := got.Find(e.Name)
			if !ok || f.Name != e.Name {
				t.Errorf("Find(%q) failed", e.Name)
			}
		}
		if _, ok := got.Find("zzz-missing"); ok {
			t.Error("Find found a missing name")
		}
	}
}

func TestValidName(t *testing.T) {
	valid := []string{"a", "a.b", "...", ".hidden", "\xff", "a b\n", strings.Repeat("x", MaxNameLen)}
	invalid := []string{"", ".", "..", "a/b", "/", "a\x00b", strings.Repeat("x", MaxNameLen+1)}
	for _, name := range append(valid, invalid...) {
		want := !slices.Contains(invalid, name)
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestTreeEncodeRefuses(t *testing.T) {
	file := func(name string) Entry { return Entry{Name: name, Type: TypeFile, Mode: 0o644, ID: testID(name)} }
	tests := []struct {
		name    string
		entries []Entry
		want    error // nil: any error
	}{
		{"unsorted", []Entry{file("b"), file("a")}, ErrTreeNotOrdered},
		{"duplicate", []Entry{file("a"), file("a")}, ErrTreeNotOrdered},
		{"dotdot", []Entry{file("..")}, ErrBadName},
		{"dot", []Entry{file(".")}, ErrBadName},
		{"slash", []Entry{file("a/b")}, ErrBadName},
		{"empty name", []Entry{file("")}, ErrBadName},
		{"NUL", []Entry{file("a\x00")}, ErrBadName},
		{"long name", []Entry{file(strings.Repeat("a", 256))}, ErrBadName},
		{"mode bits", []Entry{{Name: "a", Type: TypeFile, Mode: 0o100644}}, nil},
		{"unknown type", []Entry{{Name: "a", Type: 9}}, nil},
		{"type zero", []Entry{{Name: "a"}}, nil},
		{"dir without id", []Entry{{Name: "a", Type: TypeDir}}, nil},
		{"dir with size", []Entry{{Name: "a", Type: TypeDir, ID: testID("d"), Size: 1}}, nil},
		{"file with target", []Entry{{Name: "a", Type: TypeFile, Target: "x"}}, nil},
		{"symlink without target", []Entry{{Name: "a", Type: TypeSymlink}}, nil},
		{"symlink size mismatch", []Entry{{Name: "a", Type: TypeSymlink, Target: "abc", Size: 2}}, nil},
		{"symlink with id", []Entry{{Name: "a", Type: TypeSymlink, Target: "abc", Size: 3, ID: testID("x")}}, nil},
		{"symlink too long", []Entry{{Name: "a", Type: TypeSymlink, Target: strings.Repeat("t", MaxTargetLen+1), Size: MaxTargetLen + 1}}, nil},
		{"fifo with id", []Entry{{Name: "a", Type: TypeFifo, ID: testID("x")}}, nil},
		{"fifo with size", []Entry{{Name: "a", Type: TypeFifo, Size: 1}}, nil},
		{"xattrs unsorted", []Entry{{Name: "a", Type: TypeFifo, Xattrs: []Xattr{{Name: "b"}, {Name: "a"}}}}, nil},
		{"xattrs duplicate", []Entry{{Name: "a", Type: TypeFifo, Xattrs: []Xattr{{Name: "a"}, {Name: "a"}}}}, nil},
		{"xattr empty name", []Entry{{Name: "a", Type: TypeFifo, Xattrs: []Xattr{{Name: ""}}}}, nil},
		{"xattr NUL name", []Entry{{Name: "a", Type: TypeFifo, Xattrs: []Xattr{{Name: "u\x00"}}}}, nil},
		{"xattr too big", []Entry{{Name: "a", Type: TypeFifo, Xattrs: []Xattr{{Name: "u", Value: make([]byte, MaxXattrSize+1)}}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tree{Entries: tc.entries}
			b, err := tr.Encode()
			if err == nil {
				t.Fatalf("Encode accepted it: %x", b)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Encode error %v, want %v", err, tc.want)
			}
		})
	}
}

// rawEntry encodes an entry exactly as Encode does, without any check, so
// tests can build encodings Encode refuses to produce.
func rawEntry(e Entry) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(e.Name)))
	b = append(b, e.Name...)
	b = append(b, byte(e.Type))
	b = binary.AppendUvarint(b, uint64(e.Mode))
	if e.Type == TypeFile || e.Type == TypeDir {
		b = append(b, e.ID[:]...)
	}
	b = binary.AppendUvarint(b, e.Size)
	b = binary.AppendVarint(b, e.MTime)
	if e.Type == TypeSymlink {
		b = append(b, e.Target...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Xattrs)))
	for _, x := range e.Xattrs {
		b = binary.AppendUvarint(b, uint64(len(x.Name)))
		b = append(b, x.Name...)
		b = binary.AppendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	return b
}

func rawTree(entries ...Entry) []byte {
	b := append([]byte(treeMagic), binary.AppendUvarint(nil, uint64(len(entries)))...)
	for _, e := range entries {
		b = append(b, rawEntry(e)...)
	}
	return b
}

func TestDecodeTreeRefusesNonCanonical(t *testing.T) {
	fa := Entry{Name: "a", Type: TypeFile, Mode: 0o644, ID: testID("a"), Size: 1, MTime: 5}
	fb := Entry{Name: "b", Type: TypeFile, Mode: 0o644, ID: testID("b"), Size: 2, MTime: 6}
	good := rawTree(fa, fb)
	if _, err := DecodeTree(good); err != nil {
		t.Fatalf("the canonical base case does not decode: %v", err)
	}
	if want, _ := (&Tree{Entries: []Entry{fa, fb}}).Encode(); !bytes.Equal(want, good) {
		t.Fatal("rawTree does not mirror Encode")
	}
	// Non-minimal varint for the entry count: 0x82 0x00 is 2 in two bytes.
	nonMinimal := append([]byte(treeMagic), 0x82, 0x00)
	nonMinimal = append(nonMinimal, rawEntry(fa)...)
	nonMinimal = append(nonMinimal, rawEntry(fb)...)
	// Non-minimal varint inside an entry: the mode 0o644 padded.
	padded := append([]byte(treeMagic), 1, 1, 'a', byte(TypeFile))
	padded = append(padded, 0xa4|0x80, 0x83, 0x00) // 0o644 = 420 = 0xa4 0x03, padded to 3 bytes
	padded = append(padded, fa.ID[:]...)
	padded = append(padded, 1, 10, 0)
	tests := []struct {
		name string
		data []byte
	}{
		{"swapped entries", rawTree(fb, fa)},
		{"duplicate names", rawTree(fa, fa)},
		{"non-minimal count", nonMinimal},
		{"non-minimal mode", padded},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"trailing entry", append(append([]byte(nil), good...), rawEntry(fb)...)},
		{"truncated", good[:len(good)-1]},
		{"bad magic", append([]byte("arttree\x02"), good[len(treeMagic):]...)},
		{"no magic", good[len(treeMagic):]},
		{"empty", nil},
		{"count too large", append([]byte(treeMagic), 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"count larger than entries", append(append([]byte(treeMagic), 3), good[len(treeMagic)+1:]...)},
		{"name dotdot", rawTree(Entry{Name: "..", Type: TypeDir, ID: testID("x")})},
		{"name with slash", rawTree(Entry{Name: "a/b", Type: TypeFile, ID: testID("x")})},
		{"name dot", rawTree(Entry{Name: ".", Type: TypeDir, ID: testID("x")})},
		{"empty name", rawTree(Entry{Name: "", Type: TypeFifo})},
		{"name NUL", rawTree(Entry{Name: "a\x00", Type: TypeFifo})},
		{"unknown type", rawTree(Entry{Name: "a", Type: 7})},
		{"mode beyond mask", rawTree(Entry{Name: "a", Type: TypeFifo, Mode: 0o170000})},
		{"dir zero id", rawTree(Entry{Name: "a", Type: TypeDir})},
		{"symlink empty target", rawTree(Entry{Name: "a", Type: TypeSymlink})},
		{"xattrs unsorted", rawTree(Entry{Name: "a", Type: TypeFifo, Xattrs: []Xattr{{Name: "b"}, {Name: "a"}}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := DecodeTree(tc.data)
			if err == nil {
				t.Fatalf("DecodeTree accepted it: %+v", tr)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotCanonical) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrNotCanonical", err)
			}
		})
	}
}

// TestTreeCorruptionNeverGivesWrongValue flips every byte of an encoding:
// the result either fails to decode or is a different canonical tree with
// a different id, which a loader's hash check refuses.
func TestTreeCorruptionNeverGivesWrongValue(t *testing.T) {
	b, id, err := EncodeTree(sampleTree())
	if err != nil {
		t.Fatal(err)
	}
	decoded := 0
	for i := range b {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := append([]byte(nil), b...)
			c[i] ^= mask
			tr, err := DecodeTree(c)
			if Hash(c) == id {
				t.Fatalf("flip at %d keeps the id", i)
			}
			if err != nil {
				continue
			}
			decoded++
			again, err := tr.Encode()
			if err != nil || !bytes.Equal(again, c) {
				t.Fatalf("flip at %d decoded to a value that does not re-encode to the input", i)
			}
		}
	}
	if decoded == len(b)*3 {
		t.Fatal("no flip was detected by the decoder at all")
	}
}

// A tree encodes only up to MaxTreeSize, and one past the shared
// decoder's 64 MiB (1,024 files with a 64 KiB xattr each) decodes again.
func TestLargeTrees(t *testing.T) {
	value := bytes.Repeat([]byte{'v'}, MaxXattrSize)
	entry := func(name string, xattrs int) Entry {
		e := Entry{Name: name, Type: TypeFifo, Mode: 0o644}
		for i := range xattrs {
			e.Xattrs = append(e.Xattrs, Xattr{Name: fmt.Sprintf("user.%03d", i), Value: value})
		}
		return e
	}
	var big Tree
	for i := range 1100 {
		big.Entries = append(big.Entries, entry(fmt.Sprintf("f%04d", i), 1))
	}
	raw, id, err := EncodeTree(&big)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) <= smallDecode {
		t.Fatalf("the tree is only %d bytes", len(raw))
	}
	data, enc := CompressSmall(raw)
	back, err := Decompress(data, enc, len(raw))
	if err != nil || Hash(back) != id {
		t.Fatalf("a %d-byte tree does not decode: %v", len(raw), err)
	}
	var huge Tree
	for i := range MaxTreeSize/(MaxXattrs*MaxXattrSize) + 1 {
		huge.Entries = append(huge.Entries, entry(fmt.Sprintf("f%04d", i), MaxXattrs))
	}
	if _, _, err := EncodeTree(&huge); !errors.Is(err, ErrTreeTooLarge) {
		t.Fatalf("a tree past MaxTreeSize: %v", err)
	}
	if _, err := Decompress(data, EncZstd, MaxTreeSize+1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a stored size past MaxTreeSize: %v", err)
	}
}

func TestTimeNs(t *testing.T) {
	for _, tc := range []struct {
		sec, nsec, want int64
	}{
		{0, 0, 0},
		{1, 5, 1_000_000_005},
		{-2, 500_000_000, -1_500_000_000},
		{9223372036, 854775807, math.MaxInt64},  // the last time an int64 holds
		{9223372036, 854775808, math.MaxInt64},  // one past: clamped
		{10413792000, 0, math.MaxInt64},         // 2300-01-01
		{1 << 40, 0, math.MaxInt64},             // far future
		{-9223372037, 145224192, math.MinInt64}, // the first time an int64 holds
		{-9223372037, 145224191, math.MinInt64}, // one before: clamped
		{-1 << 40, 0, math.MinInt64},            // far past
		{-9223372036, 0, -9223372036_000000000}, // inside
	} {
		if got := TimeNs(tc.sec, tc.nsec); got != tc.want {
			t.Errorf("TimeNs(%d, %d) = %d, want %d", tc.sec, tc.nsec, got, tc.want)
		}
	}
}
