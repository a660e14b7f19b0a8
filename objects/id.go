package objects

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"
)

// IDSize is the length of an object id in bytes (BLAKE3-256).
const IDSize = 32

// ID identifies an object: the BLAKE3-256 hash of its canonical encoding
// (for file content and chunks: of the raw bytes).
type ID [IDSize]byte

// Zero is the empty id, used where an entry has no content object.
var Zero ID

// Hash returns the id of data.
func Hash(data []byte) ID { return ID(blake3.Sum256(data)) }

// String returns the full lower-case hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the abbreviated hex form shown in listings.
func (id ID) Short() string { return hex.EncodeToString(id[:6]) }

// IsZero reports whether id is the empty id.
func (id ID) IsZero() bool { return id == Zero }

// MarshalText encodes the id as hex (used by JSON).
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses a full hex id.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ErrBadID is returned for strings that are not a full hex id.
var ErrBadID = errors.New("not a full object id (64 lower-case hex digits)")

// ParseID parses the full 64-digit lower-case hex form of an id.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*IDSize {
		return id, fmt.Errorf("parse id %q: %w", s, ErrBadID)
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return id, fmt.Errorf("parse id %q: %w", s, ErrBadID)
		}
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("parse id %q: %w", s, ErrBadID)
	}
	return id, nil
}

// FromBytes converts a 32-byte slice (as stored in SQLite) to an ID.
func FromBytes(b []byte) (ID, error) {
	var id ID
	if len(b) != IDSize {
		return id, fmt.Errorf("object id has %d bytes, want %d", len(b), IDSize)
	}
	copy(id[:], b)
	return id, nil
}

// Hasher hashes a stream incrementally; Sum returns its id.
type Hasher struct{ h *blake3.Hasher }

// NewHasher returns a streaming hasher.
func NewHasher() *Hasher { return &Hasher{h: blake3.New()} }

// Write adds p to the hash; it never fails.
func (h *Hasher) Write(p []byte) (int, error) { return h.h.Write(p) }

// Sum returns the id of everything written so far.
func (h *Hasher) Sum() ID {
	var id ID
	h.h.Sum(id[:0])
	return id
}

// Reset clears the hasher for reuse.
func (h *Hasher) Reset() { h.h.Reset() }
