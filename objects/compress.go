package objects

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// Encodings of stored object data.
const (
	EncRaw  = 0
	EncZstd = 1
)

// The coders are built on first use (not at program start, which every
// art command pays for) and are safe for concurrent EncodeAll/DecodeAll.
// An encoder compresses one input at a time, so each level keeps up to
// one encoder per CPU, at most 16 (encoderPool): with a single encoder,
// the "parallel" compression of push, the journal's applier and commit
// ran one chunk at a time.
var (
	fastEnc = newEncoderPool(zstd.SpeedFastest)
	goodEnc = newEncoderPool(zstd.SpeedBetterCompression)
	zdec    = sync.OnceValue(func() *zstd.Decoder {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(smallDecode))
		return d
	})
	// zdecLarge decodes what smallDecode does not fit: trees of up to
	// MaxTreeSize (a directory of many files, or with large xattrs).
	zdecLarge = sync.OnceValue(func() *zstd.Decoder {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxTreeSize))
		return d
	})
)

// MaxTreeSize bounds a tree's encoding; Encode refuses more, so that every
// tree written can be read back (a directory of 1,024 files with a 64 KiB
// xattr each encoded past the decoder's old 64 MiB and made its branch
// unreadable). SQLite takes blobs of up to 10^9 bytes.
const MaxTreeSize = 512 << 20

// smallDecode is as much as one decoding by the shared decoder may produce.
const smallDecode = 64 << 20

// encoderPool lends encoders of one level. Encoders are made when every
// existing one is busy, up to one per CPU and at most maxEncoders; beyond
// that a caller waits for one to come back. They are kept for the life of
// the process: making one costs its tables' page faults (milliseconds at
// the stronger level), and each holds megabytes.
type encoderPool struct {
	level zstd.EncoderLevel
	free  chan *zstd.Encoder
	made  atomic.Int32
}

// maxEncoders bounds the encoders of one level: on a large host, one per
// CPU would keep hundreds of megabytes for compression that the single
// SQLite writer cannot take in faster anyway.
const maxEncoders = 16

func newEncoderPool(level zstd.EncoderLevel) *encoderPool {
	return &encoderPool{level: level, free: make(chan *zstd.Encoder, min(runtime.NumCPU(), maxEncoders))}
}

func (p *encoderPool) get() *zstd.Encoder {
	select {
	case e := <-p.free:
		return e
	default:
	}
	if p.made.Add(1) <= int32(cap(p.free)) {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(p.level), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder: %v", err)) // only for invalid options
		}
		return e
	}
	p.made.Add(-1)
	return <-p.free
}

func (p *encoderPool) put(e *zstd.Encoder) { p.free <- e }

// Compress returns data zstd-compressed when that makes it smaller, with
// the encoding used. It favours speed: the FUSE write path uses it.
func Compress(data []byte) ([]byte, int) { return compress(fastEnc, data) }

// CompressSmall is Compress at a stronger level, for data stored once and
// kept long (push and commit, which hash with all cores anyway).
func CompressSmall(data []byte) ([]byte, int) { return compress(goodEnc, data) }

func compress(p *encoderPool, data []byte) ([]byte, int) {
	if len(data) < 64 {
		return data, EncRaw
	}
	e := p.get()
	c := e.EncodeAll(data, make([]byte, 0, len(data)/2))
	p.put(e)
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
		if rawSize < 0 || rawSize > MaxTreeSize {
			return nil, fmt.Errorf("decompress: %w: size %d", ErrCorrupt, rawSize)
		}
		dec := zdec()
		if rawSize > smallDecode {
			dec = zdecLarge()
		}
		out, err := dec.DecodeAll(data, make([]byte, 0, rawSize))
		if err != nil {
			return nil, fmt.Errorf("decompress: %w: %v", ErrCorrupt, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("decompress: %w: unknown encoding %d", ErrCorrupt, enc)
}
