package repo

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"io"
	"path"

	"github.com/artproject/art/objects"
)

// A git index (.git/index) holds, for every tracked path, its mode, object
// id and flags, and the stat data (times, device, inode, owner, size) git
// last saw the file with. A git command on the host refreshes the stat
// data of files a pull wrote (their inodes and times are new to git) and
// rewrites the index: its bytes change, what it says does not. Pull takes
// such an index for unchanged on the host (sameGitIndex): the first git
// status after every pull made the next pull of a session that committed
// conflict on .git/index.

// gitIndexCacheExt are the index extensions that only cache what the
// entries and the work tree say (git drops or rebuilds them freely):
// the cache tree, the untracked cache, fsmonitor's token, and the entry
// offset tables.
var gitIndexCacheExt = map[string]bool{"TREE": true, "UNTR": true, "FSMN": true, "EOIE": true, "IEOT": true}

// gitIndexContent returns what a git index says, its stat data and
// caches left out: the version, then each entry's mode, object id, flags
// and path, then the other extensions. ok is false for anything that is
// not a whole, checksummed SHA-1 index of version 2 to 4, or that keeps
// its entries elsewhere (a split index's "link").
func gitIndexContent(data []byte) (out []byte, ok bool) {
	const hashLen = sha1.Size
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return nil, false
	}
	body, sum := data[:len(data)-hashLen], data[len(data)-hashLen:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) && !bytes.Equal(sum, make([]byte, hashLen)) {
		return nil, false // index.skipHash writes zeros
	}
	version := binary.BigEndian.Uint32(body[4:8])
	if version < 2 || version > 4 {
		return nil, false
	}
	count := binary.BigEndian.Uint32(body[8:12])
	out = append(out, body[4:12]...)
	off := 12
	var name []byte // the previous entry's path (version 4 strips its prefix)
	for i := uint32(0); i < count; i++ {
		const fixed = 40 + hashLen + 2 // stat data, mode inside it, id, flags
		if off+fixed > len(body) {
			return nil, false
		}
		e := body[off:]
		mode, id := e[24:28], e[40:40+hashLen]
		flags := binary.BigEndian.Uint16(e[40+hashLen:])
		n := fixed
		out = append(out, mode...)
		out = append(out, id...)
		out = append(out, e[40+hashLen:fixed]...)
		if flags&0x4000 != 0 { // extended flags
			if version < 3 || off+n+2 > len(body) {
				return nil, false
			}
			out = append(out, e[n:n+2]...)
			n += 2
		}
		if version == 4 {
			strip, used := gitVarint(e[n:])
			if used == 0 || strip > uint64(len(name)) {
				return nil, false
			}
			n += used
			end := bytes.IndexByte(e[n:], 0)
			if end < 0 {
				return nil, false
			}
			name = append(name[:len(name)-int(strip)], e[n:n+end]...)
			n += end + 1
		} else {
			end := bytes.IndexByte(e[n:], 0)
			if end < 0 {
				return nil, false
			}
			name = append(name[:0], e[n:n+end]...)
			n = (n + end + 8) &^ 7 // NUL-padded to a multiple of 8
			if off+n > len(body) {
				return nil, false
			}
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(name)))
		out = append(out, name...)
		off += n
	}
	for off < len(body) {
		if off+8 > len(body) {
			return nil, false
		}
		sig := string(body[off : off+4])
		size := int(binary.BigEndian.Uint32(body[off+4 : off+8]))
		if size < 0 || off+8+size > len(body) || sig == "link" {
			return nil, false
		}
		if !gitIndexCacheExt[sig] {
			out = append(out, body[off:off+8+size]...)
		}
		off += 8 + size
	}
	return out, true
}

// gitVarint decodes git's offset varint (read-cache.c, varint.c): the
// value and the bytes it took (0: malformed).
func gitVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 127)
	n := 1
	for c&128 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0
		}
		v++
		c = b[n]
		v = v<<7 | uint64(c&127)
		n++
	}
	return v, n
}

// sameGitIndex reports whether two git index files say the same (their
// stat data and caches aside); false when either is not one.
func sameGitIndex(a, b []byte) bool {
	ca, ok := gitIndexContent(a)
	if !ok {
		return false
	}
	cb, ok := gitIndexContent(b)
	return ok && bytes.Equal(ca, cb)
}

// isGitIndexPath reports whether a workspace-relative path is the index of
// a .git directory.
func isGitIndexPath(p string) bool {
	return path.Base(p) == "index" && path.Base(path.Dir(p)) == ".git"
}

// refreshedGitIndex reports whether stored file host differs from base
// only as git's refresh of an index changes it (sameGitIndex), reading
// both inside the transaction (a push stored the host's in it).
func (tx *Tx) refreshedGitIndex(host, base *objects.Entry) (bool, error) {
	if host.Type != objects.TypeFile || base.Type != objects.TypeFile || host.Mode != base.Mode ||
		host.Size > maxGitIndex || base.Size > maxGitIndex {
		return false, nil
	}
	read := func(e *objects.Entry) ([]byte, error) {
		fr, err := objects.NewFileReader(tx, e.ID, int64(e.Size))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, e.Size)
		if _, err := io.ReadFull(fr, buf); err != nil && e.Size > 0 {
			return nil, err
		}
		return buf, nil
	}
	h, err := read(host)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", host.Name, err)
	}
	b, err := read(base)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", base.Name, err)
	}
	return sameGitIndex(h, b), nil
}
