package objects

import "encoding/binary"

// Decoder reads the varint-based encodings of art (trees, the sync state,
// the overlay journal) from a byte slice. The first failure sticks in Err
// (wrapping nothing: it is ErrCorrupt) and every later read returns zero
// values, so callers check Err once at the end.
type Decoder struct {
	B   []byte
	Err error
}

func (d *Decoder) fail() {
	d.Err = ErrCorrupt
	d.B = nil
}

// Uvarint reads an unsigned varint no larger than max.
func (d *Decoder) Uvarint(max uint64) uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 || v > max {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads n bytes (a sub-slice of the input, not a copy).
func (d *Decoder) Bytes(n uint64) []byte {
	if d.Err != nil {
		return nil
	}
	if uint64(len(d.B)) < n {
		d.fail()
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if v := d.Bytes(1); v != nil {
		return v[0]
	}
	return 0
}

// ID reads a 32-byte id.
func (d *Decoder) ID() ID {
	var id ID
	copy(id[:], d.Bytes(IDSize))
	return id
}
