package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/artproject/art/fuse"
	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
	"github.com/artproject/art/sandbox"
)

// cleanupStale removes the mounts of worktrees whose art process died and
// marks them interrupted, so no dead mount outlives the next command.
func (g *globals) cleanupStale(r *repo.Repo) {
	wts, err := r.Worktrees()
	if err != nil {
		return
	}
	for _, w := range wts {
		if w.State != repo.StateInterrupted {
			continue
		}
		if w.Kind == repo.KindView {
			// A read-only view holds nothing to record.
			if done, err := fuse.CleanupStale(w.Mountpoint); err != nil {
				fmt.Fprintf(g.stderr, "art: warning: %s\n", repo.EscapeControls(err.Error()))
			} else {
				if done {
					fmt.Fprintf(g.stderr, "art: removed the stale read-only mount of %s at %s\n", w.Branch, w.Mountpoint)
				}
				if r.RemoveView(w) == nil {
					os.Remove(overlay.JournalPath(r, w)) // empty: a view writes nothing
				}
			}
			continue
		}
		if done, err := fuse.CleanupStale(w.Mountpoint); err != nil {
			fmt.Fprintf(g.stderr, "art: warning: %s\n", repo.EscapeControls(err.Error()))
		} else if done && w.Kind == "run" {
			// Recorded just below (or a warning says how to).
			fmt.Fprintf(g.stderr, "art: removed the stale mount of interrupted worktree #%d at %s\n", w.ID, w.Mountpoint)
		} else if done {
			fmt.Fprintf(g.stderr, "art: removed the stale mount of interrupted worktree #%d at %s (record its changes with 'art commit --worktree %d')\n", w.ID, w.Mountpoint, w.ID)
		}
		r.MarkInterrupted(w)
		if w.Kind == "run" {
			// The mount point of a run is art's own temporary directory
			// (the dead art could not remove it); Remove only takes it
			// when empty, i.e. no longer mounted. So is its scheduling
			// group, if it made one.
			if w.Mountpoint != "" {
				removeMountpoint(w.Mountpoint)
			}
			sandbox.RemoveStaleSchedGroups()
			// Every session is a commit: record the one art was killed in,
			// with what it wrote up to its last flush.
			if err := commitWorktree(g, r, w, "", "", g.stderr); errors.Is(err, repo.ErrWorktreeTaken) {
				continue // another art command records it, or resumed it
			} else if err != nil {
				fmt.Fprintf(g.stderr, "art: warning: could not record interrupted session #%d: %s (try 'art commit --worktree %d')\n", w.ID, repo.EscapeControls(err.Error()), w.ID)
			} else {
				fmt.Fprintf(g.stderr, "art: recorded the interrupted session of worktree #%d on %s\n", w.ID, w.Branch)
			}
		}
	}
}

// pendingSession is a worktree's session record: the session as it began,
// or, once it ended and could not be recorded, as it ended, with the
// commit message it was to have (art run -M).
type pendingSession struct {
	*objects.Session
	Message string `json:"art_message,omitempty"`
}

// interruptedSession rebuilds the session record of a worktree whose
// process died, marked "interrupted".
func interruptedSession(wt *repo.Worktree) (*objects.Session, string) {
	var p pendingSession
	if wt.Session != "" && json.Unmarshal([]byte(wt.Session), &p) == nil && p.Session != nil {
		s := *p.Session
		if s.End > 0 && s.Status != "" && s.Mode == wt.Kind {
			// The session ended; only recording it failed (a full
			// disk): it is recorded as it ended. (Not when another kind
			// of session resumed the worktree since: an art mount
			// keeps the record of the run it continued.)
			msg := p.Message
			if msg == "" {
				msg = "run: " + strings.Join(s.Argv, " ")
			}
			return &s, msg
		}
		s.Status = "interrupted"
		msg := "interrupted session"
		if len(s.Argv) > 0 {
			msg = "run (interrupted): " + strings.Join(s.Argv, " ")
		}
		return &s, msg
	}
	return &objects.Session{Mode: wt.Kind, Status: "interrupted", Version: repo.Version, Start: wt.Created}, wt.Kind + " session (interrupted)"
}
