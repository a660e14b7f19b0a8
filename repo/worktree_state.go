package repo

import (
	"fmt"
	"time"
)

// MarkInterrupted records that w's owner died, unless its row says so
// already. SetWorktreeState rewrites the row and its updated time every
// time: the stale cleanup every command runs then changed the repository
// on each of them, a refused 'art commit -b main' included.
func (r *Repo) MarkInterrupted(w *Worktree) error {
	_, err := r.DB.Exec(`UPDATE worktrees SET state=?, updated=? WHERE id=? AND pid=? AND pid_start=? AND state!=?`,
		StateInterrupted, time.Now().UnixNano(), w.ID, w.Pid, w.PidStart, StateInterrupted)
	if err != nil {
		return fmt.Errorf("mark worktree #%d interrupted: %w", w.ID, err)
	}
	return nil
}
