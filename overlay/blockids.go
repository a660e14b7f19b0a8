package overlay

import (
	"iter"

	"github.com/artproject/art/objects"
)

// blockIDs maps a file's block indexes to the chunks stored for them. Most
// files have one block: it is held without a map, which took about 400
// bytes a file, a third of what a mount kept for a tree of small files.
// A stored chunk's id is never zero, so a zero first means none.
type blockIDs struct {
	first   objects.ID
	firstAt int64
	more    map[int64]objects.ID // every entry, once there were two
}

func (b *blockIDs) get(idx int64) (objects.ID, bool) {
	if b.more != nil {
		id, ok := b.more[idx]
		return id, ok
	}
	if !b.first.IsZero() && b.firstAt == idx {
		return b.first, true
	}
	return objects.Zero, false
}

func (b *blockIDs) set(idx int64, id objects.ID) {
	switch {
	case b.more != nil:
		b.more[idx] = id
	case b.first.IsZero() || b.firstAt == idx:
		b.first, b.firstAt = id, idx
	default:
		b.more = map[int64]objects.ID{b.firstAt: b.first, idx: id}
		b.first, b.firstAt = objects.Zero, 0
	}
}

func (b *blockIDs) del(idx int64) {
	if b.more != nil {
		delete(b.more, idx)
	} else if !b.first.IsZero() && b.firstAt == idx {
		b.first, b.firstAt = objects.Zero, 0
	}
}

func (b *blockIDs) len() int {
	if b.more != nil {
		return len(b.more)
	}
	if !b.first.IsZero() {
		return 1
	}
	return 0
}

// all yields every entry, in no order; the loop may delete the entry it
// is given.
func (b *blockIDs) all() iter.Seq2[int64, objects.ID] {
	return func(yield func(int64, objects.ID) bool) {
		if b.more != nil {
			for idx, id := range b.more {
				if !yield(idx, id) {
					return
				}
			}
			return
		}
		if !b.first.IsZero() {
			yield(b.firstAt, b.first)
		}
	}
}
