package overlay

import (
	"testing"

	"github.com/artproject/art/objects"
)

// FuzzDecodeRecord: a journal left by a crash is read back at the next
// mount; a damaged record must be an error, never a panic, and a record
// that decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	data := []byte("block data")
	id := objects.Hash(data)
	rec := &record{
		inodes: []inodeRow{
			{ino: 7, typ: objects.TypeFile, mode: 0o644, nlink: 1, size: 10, mtime: 1, ctime: 2, atime: 3, base: id[:], baseSize: 4, xattrs: encodeXattrs([]objects.Xattr{{Name: "user.a", Value: []byte("v")}})},
			{ino: 8, deleted: true},
			{ino: 9, typ: objects.TypeSymlink, mode: 0o777, nlink: 1, target: "../x"},
		},
		dirents: []direntRow{{key: direntKey{dir: 1, name: "a\nb"}, ino: 7, present: true}, {key: direntKey{dir: 1, name: "gone"}}},
		blocks:  []blockRow{{key: blockKey{ino: 7, idx: 0}, id: id, present: true}, {key: blockKey{ino: 7, idx: 3}}},
		chunks:  map[objects.ID]*pendingChunk{id: {raw: data, enc: objects.EncRaw, data: data}},
	}
	f.Add(encodeRecord(rec))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		again, err := decodeRecord(encodeRecord(r))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if len(again.inodes) != len(r.inodes) || len(again.dirents) != len(r.dirents) || len(again.blocks) != len(r.blocks) || len(again.chunks) != len(r.chunks) {
			t.Fatal("round trip changed the record")
		}
	})
}

// TestDecodeRecordRoundTrip checks a record with every kind of row.
func TestDecodeRecordRoundTrip(t *testing.T) {
	data := []byte("hello")
	id := objects.Hash(data)
	rec := &record{
		inodes:  []inodeRow{{ino: 2, typ: objects.TypeDir, mode: 0o755, nlink: 2, mtime: -5}},
		dirents: []direntRow{{key: direntKey{dir: 1, name: "d"}, ino: 2, present: true}},
		blocks:  []blockRow{{key: blockKey{ino: 3, idx: 1 << 40}, id: id, present: true}},
		chunks:  map[objects.ID]*pendingChunk{id: {raw: data, enc: objects.EncRaw, data: data}},
	}
	got, err := decodeRecord(encodeRecord(rec))
	if err != nil {
		t.Fatal(err)
	}
	if got.inodes[0].mtime != -5 || got.dirents[0].key.name != "d" || got.blocks[0].key.idx != 1<<40 || string(got.chunks[id].raw) != "hello" {
		t.Fatalf("round trip: %+v", got)
	}
	// A chunk whose data does not hash to its id is refused.
	bad := encodeRecord(&record{chunks: map[objects.ID]*pendingChunk{objects.Hash([]byte("other")): {raw: data, enc: objects.EncRaw, data: data}}})
	if _, err := decodeRecord(bad); err == nil {
		t.Fatal("a chunk with the wrong id was accepted")
	}
}
