package repo

import (
	"container/heap"
	"fmt"

	"github.com/artproject/art/objects"
)

// LogEntry is one commit in a history listing.
type LogEntry struct {
	ID     objects.ID
	Commit *objects.Commit
}

// Log walks history from the given commits, newest first (by commit time,
// ties by id), visiting each commit once. max <= 0 means no limit.
func (r *Repo) Log(starts []objects.ID, max int) ([]LogEntry, error) {
	seen := map[objects.ID]bool{}
	h := &commitHeap{}
	push := func(id objects.ID) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		c, err := r.LoadCommit(id)
		if err != nil {
			return err
		}
		heap.Push(h, LogEntry{ID: id, Commit: c})
		return nil
	}
	for _, s := range starts {
		if err := push(s); err != nil {
			return nil, err
		}
	}
	var out []LogEntry
	for h.Len() > 0 && (max <= 0 || len(out) < max) {
		e := heap.Pop(h).(LogEntry)
		out = append(out, e)
		for _, p := range e.Commit.Parents {
			if err := push(p); err != nil {
				return nil, fmt.Errorf("log: parent of %s: %w", e.ID.Short(), err)
			}
		}
	}
	return out, nil
}

type commitHeap []LogEntry

func (h commitHeap) Len() int { return len(h) }
func (h commitHeap) Less(i, j int) bool {
	if h[i].Commit.Time != h[j].Commit.Time {
		return h[i].Commit.Time > h[j].Commit.Time
	}
	return h[i].ID.String() > h[j].ID.String()
}
func (h commitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *commitHeap) Push(x any)   { *h = append(*h, x.(LogEntry)) }
func (h *commitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Decorations maps commit ids to the branch names (and HEAD) at them.
func (r *Repo) Decorations() (map[objects.ID][]string, error) {
	bs, err := r.Branches()
	if err != nil {
		return nil, err
	}
	h, err := r.Head()
	if err != nil {
		return nil, err
	}
	m := map[objects.ID][]string{}
	if h.Detached() {
		m[h.Commit] = append(m[h.Commit], "HEAD")
	}
	for _, b := range bs {
		name := b.Name
		if b.Name == h.Branch {
			name = "HEAD -> " + name
			m[b.Commit] = append([]string{name}, m[b.Commit]...)
			continue
		}
		m[b.Commit] = append(m[b.Commit], name)
	}
	return m, nil
}

// ChangeCounts counts added, modified and deleted paths of a commit
// against its first parent.
func (r *Repo) ChangeCounts(c *objects.Commit) (added, modified, deleted int, err error) {
	return r.NewChangeCounter().Counts(c)
}

// ChangeCounter counts the changes of one commit after another, as art
// log lists them: the trees a commit's count decoded are kept for the
// next count, whose new side they are when that is the parent's. Each
// tree was decoded twice, which made art log of 100 sessions in a
// directory of 20,000 files take 1.28 s of CPU instead of 0.86.
type ChangeCounter struct {
	r         *Repo
	prev, cur map[objects.ID]*objects.Tree
	decoded   int // trees read from the repository (tests)
}

// NewChangeCounter returns a counter with nothing kept.
func (r *Repo) NewChangeCounter() *ChangeCounter {
	return &ChangeCounter{r: r, prev: map[objects.ID]*objects.Tree{}, cur: map[objects.ID]*objects.Tree{}}
}

func (cc *ChangeCounter) load(id objects.ID) (*objects.Tree, error) {
	if t, ok := cc.cur[id]; ok {
		return t, nil
	}
	t, ok := cc.prev[id]
	if !ok {
		var err error
		if t, err = cc.r.loadTreeOnce(id); err != nil {
			return nil, err
		}
		cc.decoded++
	}
	cc.cur[id] = t
	return t, nil
}

// Counts counts added, modified and deleted paths of c against its first
// parent.
func (cc *ChangeCounter) Counts(c *objects.Commit) (added, modified, deleted int, err error) {
	var parentTree objects.ID
	if len(c.Parents) > 0 {
		pc, err := cc.r.LoadCommit(c.Parents[0])
		if err != nil {
			return 0, 0, 0, err
		}
		parentTree = pc.Tree
	}
	// Only the trees of this count are kept for the next.
	cc.prev, cc.cur = cc.cur, map[objects.ID]*objects.Tree{}
	changes, err := cc.r.diffTrees(parentTree, c.Tree, nil, cc.load)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, ch := range changes {
		switch ch.Status() {
		case "A":
			added++
		case "D":
			deleted++
		default:
			modified++
		}
	}
	return added, modified, deleted, nil
}
