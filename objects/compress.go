package objects

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Encodings of stored object data.
const (
	EncRaw  = 0
	EncZstd = 1
)

// The coders are built on first use (not at program start, which every
// art command pays for) and are safe for concurrent EncodeAll/DecodeAll.
var (
	fastEnc = sync.OnceValue(func() *zstd.Encoder {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		return e
	})
	goodEnc = sync.OnceValue(func() *zstd.Encoder {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20))
		return d
	})
)

// Compress returns data zstd-compressed when that makes it smaller, with
// the encoding used. It favours speed: the FUSE write path uses it.
func Compress(data []byte) ([]byte, int) { return compress(fastEnc(), data) }

// CompressSmall is Compress at a stronger level, for data stored once and
// kept long (push and commit, which hash with all cores anyway).
func CompressSmall(data []byte) ([]byte, int) { return compress(goodEnc(), data) }

func compress(e *zstd.Encoder, data []byte) ([]byte, int) {
	if len(data) < 64 {
		return data, EncRaw
	}
	c := e.EncodeAll(data, make([]byte, 0, len(data)/2))
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
		out, err := zdec().DecodeAll(data, make([]byte, 0, rawSize))
		if err != nil {
			return nil, fmt.Errorf("decompress: %w: %v", ErrCorrupt, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("decompress: %w: unknown encoding %d", ErrCorrupt, enc)
}
