package objects

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Encodings of stored object data.
const (
	EncRaw  = 0
	EncZstd = 1
)

// Both are safe for concurrent EncodeAll/DecodeAll calls.
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20))
)

// Compress returns data zstd-compressed when that makes it smaller, with
// the encoding used.
func Compress(data []byte) ([]byte, int) {
	if len(data) < 64 {
		return data, EncRaw
	}
	c := zenc.EncodeAll(data, make([]byte, 0, len(data)/2))
	if len(c) >= len(data)-len(data)/32 {
		return data, EncRaw
	}
	return c, EncZstd
}

// Decompress reverses Compress. rawSize bounds the output.
func Decompress(data []byte, enc int, rawSize int) ([]byte, error) {
	switch enc {
	case EncRaw:
		return data, nil
	case EncZstd:
		out, err := zdec.DecodeAll(data, make([]byte, 0, rawSize))
		if err != nil {
			return nil, fmt.Errorf("decompress: %w: %v", ErrCorrupt, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("decompress: %w: unknown encoding %d", ErrCorrupt, enc)
}
