package objects

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Type is the kind of a tree entry.
type Type uint8

// Entry types. The numbers are part of the tree encoding.
const (
	TypeFile    Type = 1
	TypeDir     Type = 2
	TypeSymlink Type = 3
	TypeFifo    Type = 4
)

func (t Type) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	case TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Limits enforced on decoded trees: they bound the memory a hostile
// encoding can make art allocate.
const (
	MaxNameLen   = 255      // NAME_MAX
	MaxTargetLen = 4096     // PATH_MAX
	MaxXattrName = 255      // XATTR_NAME_MAX
	MaxXattrSize = 64 << 10 // XATTR_SIZE_MAX
	MaxXattrs    = 256
	PermMask     = 0o7777 // mode bits kept: permissions, setuid, setgid, sticky
)

// Xattr is one extended attribute of an entry.
type Xattr struct {
	Name  string
	Value []byte
}

// Entry is one name in a directory.
type Entry struct {
	Name   string // one path component: not empty, ".", "..", no '/' or NUL
	Type   Type
	Mode   uint32 // permission bits (PermMask)
	ID     ID     // file: content id; dir: tree id; otherwise Zero
	Size   uint64 // file: content length; symlink: len(Target); else 0
	MTime  int64  // modification time, ns since the Unix epoch (TimeNs)
	Target string // symlink target, stored verbatim (never resolved)
	Xattrs []Xattr
}

// Tree is a directory: entries sorted by name (bytewise), names unique.
type Tree struct {
	Entries []Entry
}

// Errors returned by tree encoding and decoding.
var (
	ErrTreeNotOrdered = errors.New("tree entries not in strictly increasing name order")
	ErrBadName        = errors.New("invalid entry name")
	ErrNotCanonical   = errors.New("encoding is not canonical")
	ErrTreeTooLarge   = errors.New("directory too large to record")
	ErrCorrupt        = errors.New("object is corrupt")
)

const treeMagic = "arttree\x01"

// ValidName reports whether name can be one path component in a tree.
func ValidName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > MaxNameLen {
		return false
	}
	return !bytes.ContainsAny([]byte(name), "/\x00")
}

// Find returns the entry called name, using binary search.
func (t *Tree) Find(name string) (*Entry, bool) {
	i := sort.Search(len(t.Entries), func(i int) bool { return t.Entries[i].Name >= name })
	if i < len(t.Entries) && t.Entries[i].Name == name {
		return &t.Entries[i], true
	}
	return nil, false
}

// Sort orders entries by name; builders call it before Encode.
func (t *Tree) Sort() {
	sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
}

func (e *Entry) validate() error {
	if !ValidName(e.Name) {
		return fmt.Errorf("%w: %q", ErrBadName, e.Name)
	}
	if e.Mode&^PermMask != 0 {
		return fmt.Errorf("entry %q: mode %o has bits outside %o", e.Name, e.Mode, PermMask)
	}
	switch e.Type {
	case TypeFile:
		if e.Target != "" {
			return fmt.Errorf("entry %q: file with a link target", e.Name)
		}
	case TypeDir:
		if e.Size != 0 || e.Target != "" {
			return fmt.Errorf("entry %q: directory with a size or target", e.Name)
		}
	case TypeSymlink:
		if !e.ID.IsZero() || e.Size != uint64(len(e.Target)) || len(e.Target) > MaxTargetLen || e.Target == "" {
			return fmt.Errorf("entry %q: inconsistent symlink", e.Name)
		}
	case TypeFifo:
		if !e.ID.IsZero() || e.Size != 0 || e.Target != "" {
			return fmt.Errorf("entry %q: fifo with content", e.Name)
		}
	default:
		return fmt.Errorf("entry %q: unknown type %d", e.Name, e.Type)
	}
	if e.Type == TypeDir && e.ID.IsZero() {
		return fmt.Errorf("entry %q: directory without tree id", e.Name)
	}
	if len(e.Xattrs) > MaxXattrs {
		return fmt.Errorf("entry %q: %d xattrs, max %d", e.Name, len(e.Xattrs), MaxXattrs)
	}
	for i, x := range e.Xattrs {
		if x.Name == "" || len(x.Name) > MaxXattrName || len(x.Value) > MaxXattrSize || bytes.IndexByte([]byte(x.Name), 0) >= 0 {
			return fmt.Errorf("entry %q: invalid xattr %q", e.Name, x.Name)
		}
		if i > 0 && e.Xattrs[i-1].Name >= x.Name {
			return fmt.Errorf("entry %q: xattrs not in strictly increasing order", e.Name)
		}
	}
	return nil
}

// Encode returns the canonical encoding of t. It refuses trees that are
// not canonical (unsorted or duplicate names, invalid entries) instead of
// fixing them, so a builder bug cannot silently produce a second id for
// the same directory.
func (t *Tree) Encode() ([]byte, error) {
	buf := make([]byte, 0, len(treeMagic)+len(t.Entries)*64)
	buf = append(buf, treeMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(t.Entries)))
	for i := range t.Entries {
		e := &t.Entries[i]
		if err := e.validate(); err != nil {
			return nil, err
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			return nil, fmt.Errorf("%w: %q after %q", ErrTreeNotOrdered, e.Name, t.Entries[i-1].Name)
		}
		buf = binary.AppendUvarint(buf, uint64(len(e.Name)))
		buf = append(buf, e.Name...)
		buf = append(buf, byte(e.Type))
		buf = binary.AppendUvarint(buf, uint64(e.Mode))
		if e.Type == TypeFile || e.Type == TypeDir {
			buf = append(buf, e.ID[:]...)
		}
		buf = binary.AppendUvarint(buf, e.Size)
		buf = binary.AppendVarint(buf, e.MTime)
		if e.Type == TypeSymlink {
			buf = append(buf, e.Target...)
		}
		buf = binary.AppendUvarint(buf, uint64(len(e.Xattrs)))
		for _, x := range e.Xattrs {
			buf = binary.AppendUvarint(buf, uint64(len(x.Name)))
			buf = append(buf, x.Name...)
			buf = binary.AppendUvarint(buf, uint64(len(x.Value)))
			buf = append(buf, x.Value...)
		}
		if len(buf) > MaxTreeSize {
			return nil, fmt.Errorf("%w: %d entries take more than %d bytes (remove entries or xattrs from the directory)", ErrTreeTooLarge, len(t.Entries), MaxTreeSize)
		}
	}
	return buf, nil
}

// EncodeTree encodes t and returns the encoding with its id.
func EncodeTree(t *Tree) ([]byte, ID, error) {
	b, err := t.Encode()
	if err != nil {
		return nil, Zero, err
	}
	return b, Hash(b), nil
}

// DecodeTree parses a canonical tree encoding. Any deviation from the
// canonical form is an error wrapping ErrCorrupt or ErrNotCanonical.
func DecodeTree(data []byte) (*Tree, error) {
	if !bytes.HasPrefix(data, []byte(treeMagic)) {
		return nil, fmt.Errorf("decode tree: %w: bad magic", ErrCorrupt)
	}
	d := &Decoder{B: data[len(treeMagic):]}
	n := d.Uvarint(uint64(len(data))) // each entry takes > 1 byte
	if d.Err != nil {
		return nil, fmt.Errorf("decode tree: %w", d.Err)
	}
	t := &Tree{Entries: make([]Entry, 0, n)}
	for i := uint64(0); i < n; i++ {
		var e Entry
		e.Name = string(d.Bytes(d.Uvarint(MaxNameLen)))
		typ := d.Bytes(1)
		if d.Err != nil {
			break
		}
		e.Type = Type(typ[0])
		e.Mode = uint32(d.Uvarint(PermMask))
		if e.Type == TypeFile || e.Type == TypeDir {
			copy(e.ID[:], d.Bytes(IDSize))
		}
		e.Size = d.Uvarint(1<<63 - 1)
		e.MTime = d.Varint()
		if e.Type == TypeSymlink {
			if e.Size > MaxTargetLen {
				d.Err = ErrCorrupt
				break
			}
			e.Target = string(d.Bytes(e.Size))
		}
		nx := d.Uvarint(MaxXattrs)
		for j := uint64(0); j < nx && d.Err == nil; j++ {
			name := string(d.Bytes(d.Uvarint(MaxXattrName)))
			val := d.Bytes(d.Uvarint(MaxXattrSize))
			e.Xattrs = append(e.Xattrs, Xattr{Name: name, Value: append([]byte(nil), val...)})
		}
		if d.Err != nil {
			break
		}
		t.Entries = append(t.Entries, e)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("decode tree: %w", d.Err)
	}
	if len(d.B) != 0 {
		return nil, fmt.Errorf("decode tree: %w: %d trailing bytes", ErrCorrupt, len(d.B))
	}
	// Re-encoding must give the same bytes: this rejects unsorted or
	// duplicate names, invalid entries and non-minimal varints at once.
	again, err := t.Encode()
	if err != nil {
		return nil, fmt.Errorf("decode tree: %w: %v", ErrNotCanonical, err)
	}
	if !bytes.Equal(again, data) {
		return nil, fmt.Errorf("decode tree: %w", ErrNotCanonical)
	}
	return t, nil
}

// TimeNs is a time of sec seconds and nsec nanoseconds since the Unix epoch
// in nanoseconds, as trees and the overlay hold times, clamped to what an
// int64 holds (1677-09-21 to 2262-04-11): a file dated 2300, which ext4
// keeps, wrapped round to 1715.
func TimeNs(sec, nsec int64) int64 {
	const (
		ns      = 1_000_000_000
		maxSec  = math.MaxInt64 / ns // 9223372036, and 854775807 ns
		maxNsec = math.MaxInt64 % ns
		minSec  = math.MinInt64/ns - 1 // -9223372037, and 145224192 ns
		minNsec = ns + math.MinInt64%ns
	)
	switch {
	case sec > maxSec || sec == maxSec && nsec > maxNsec:
		return math.MaxInt64
	case sec < minSec || sec == minSec && nsec < minNsec:
		return math.MinInt64
	}
	return sec*ns + nsec
}
