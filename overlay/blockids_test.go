package overlay

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/artproject/art/objects"
)

// TestBlockIDs runs random sets, deletes and deletes while ranging on a
// blockIDs and on a plain map, and compares them after every step.
func TestBlockIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var b blockIDs
		want := map[int64]objects.ID{}
		for step := 0; step < 40; step++ {
			idx := int64(rng.IntN(4)) * (1 + int64(rng.IntN(2))<<40)
			switch rng.IntN(4) {
			case 0, 1:
				id := objects.Hash([]byte{byte(round), byte(step)})
				b.set(idx, id)
				want[idx] = id
			case 2:
				b.del(idx)
				delete(want, idx)
			case 3:
				cut := idx
				for i := range b.all() {
					if i >= cut {
						b.del(i)
					}
				}
				maps.DeleteFunc(want, func(i int64, _ objects.ID) bool { return i >= cut })
			}
			got := map[int64]objects.ID{}
			for i, id := range b.all() {
				got[i] = id
			}
			if !maps.Equal(got, want) || b.len() != len(want) {
				t.Fatalf("round %d step %d: %v (len %d), want %v", round, step, got, b.len(), want)
			}
			for i := int64(-1); i < 5; i++ {
				id, ok := b.get(i)
				if wid, wok := want[i]; ok != wok || id != wid {
					t.Fatalf("round %d step %d: get(%d) = %v %v, want %v %v", round, step, i, id, ok, wid, wok)
				}
			}
		}
	}
}
