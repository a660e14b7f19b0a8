package repo

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/artproject/art/objects"
)

// Worktree states.
const (
	StateLive        = "live"
	StateInterrupted = "interrupted"
)

// Worktree is one live or interrupted session with its own upper layer.
type Worktree struct {
	ID         int64
	Branch     string
	Base       objects.ID
	Pid        int
	PidStart   int64 // start time of Pid (from /proc), to detect pid reuse
	Mountpoint string
	State      string
	Kind       string // "run", "mount" or KindView
	Session    string // JSON of the session being recorded (argv, start...)
	Pending    int    // upper-layer entries not yet committed
	Created    int64

	// What a resumed worktree was before CreateWorktree took it, which
	// AbandonWorktree restores.
	prevKind, prevSession, prevMountpoint string
	resumed                               bool
}

// KindView is the kind of a read-only mount's worktree (art mount --ro).
// It holds nothing and records nothing, so it neither claims its branch
// nor resumes the branch's interrupted worktree: a view that resumed one
// deleted its pending work at its end. Its row keeps its base commit from
// gc while it is served, and a dead one is removed, not recorded.
const KindView = "view"

// PreviousSession is the session record a resumed worktree held before
// CreateWorktree gave it to the caller ("" for a new one): the session
// whose work it continues.
func (w *Worktree) PreviousSession() string { return w.prevSession }

// PreviousKind is the kind a resumed worktree had before ("" for a new one).
func (w *Worktree) PreviousKind() string { return w.prevKind }

// ErrNoWorktree is returned for unknown worktree ids.
var ErrNoWorktree = errors.New("no such worktree")

func scanWorktree(sc interface{ Scan(...any) error }) (*Worktree, error) {
	w := &Worktree{}
	var base []byte
	if err := sc.Scan(&w.ID, &w.Branch, &base, &w.Pid, &w.PidStart, &w.Mountpoint, &w.State, &w.Kind, &w.Session, &w.Created, &w.Pending); err != nil {
		return nil, err
	}
	var err error
	w.Base, err = objects.FromBytes(base)
	return w, err
}

const worktreeCols = `id, branch, base, pid, pid_start, mountpoint, state, kind, session, created,
	(SELECT count(*) FROM upper_dirents d WHERE d.wt=worktrees.id) + (SELECT count(*) FROM upper_inodes i WHERE i.wt=worktrees.id AND i.type != 2)`

// Worktrees lists worktrees, marking those whose owner died as interrupted.
func (r *Repo) Worktrees() ([]*Worktree, error) {
	rows, err := r.DB.Query(`SELECT ` + worktreeCols + ` FROM worktrees ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	defer rows.Close()
	var out []*Worktree
	for rows.Next() {
		w, err := scanWorktree(rows)
		if err != nil {
			return nil, err
		}
		w.State = effectiveState(w)
		out = append(out, w)
	}
	return out, rows.Err()
}

// Worktree returns one worktree.
func (r *Repo) Worktree(id int64) (*Worktree, error) {
	w, err := scanWorktree(r.DB.QueryRow(`SELECT `+worktreeCols+` FROM worktrees WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: #%d (list them with 'art status')", ErrNoWorktree, id)
	}
	if err != nil {
		return nil, err
	}
	w.State = effectiveState(w)
	return w, nil
}

// effectiveState is a worktree's state as its owner's life says: live
// while the process that claimed it runs, whatever the row says (a stale
// mark, as an older art could leave), interrupted once it is gone.
func effectiveState(w *Worktree) string {
	if ProcessAlive(w.Pid, w.PidStart) {
		return StateLive
	}
	return StateInterrupted
}

// CreateWorktree registers a live worktree for the calling process on a
// branch. A branch with a live worktree is refused; an interrupted one is
// taken over (its pending changes are kept), so nothing is lost.
func (r *Repo) CreateWorktree(branch, kind, mountpoint, session string) (*Worktree, bool, error) {
	tx, err := r.Begin()
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT `+worktreeCols+` FROM worktrees WHERE branch=? ORDER BY id`, branch)
	if err != nil {
		return nil, false, err
	}
	var existing []*Worktree
	for rows.Next() {
		w, err := scanWorktree(rows)
		if err != nil {
			rows.Close()
			return nil, false, err
		}
		if w.Kind != KindView {
			existing = append(existing, w)
		}
	}
	rows.Close()
	pid := os.Getpid()
	start := ProcessStart(pid)
	now := time.Now().UnixNano()
	for _, w := range existing {
		if ProcessAlive(w.Pid, w.PidStart) {
			return nil, false, fmt.Errorf("%w: branch %s is in use by worktree #%d (pid %d); start another attempt on a new branch with -b NEW-NAME", ErrBranchInUse, branch, w.ID, w.Pid)
		}
	}
	if len(existing) > 0 {
		// Resume the interrupted worktree: its upper layer holds work.
		// The check above and this claim are one write transaction, as
		// ClaimWorktree's.
		w := existing[0]
		w.prevKind, w.prevSession, w.prevMountpoint, w.resumed = w.Kind, w.Session, w.Mountpoint, true
		if session == "" {
			session = w.Session // a mount records none of its own
		}
		// The session record is this session's: if art dies in it, the
		// recovery records what was pending with it.
		if _, err := tx.Exec(`UPDATE worktrees SET pid=?, pid_start=?, mountpoint=?, state=?, kind=?, session=?, updated=? WHERE id=?`,
			pid, start, mountpoint, StateLive, kind, session, now, w.ID); err != nil {
			return nil, false, err
		}
		w.Pid, w.PidStart, w.Mountpoint, w.State, w.Kind, w.Session = pid, start, mountpoint, StateLive, kind, session
		return w, true, tx.Commit()
	}
	tip, err := tx.BranchTip(branch)
	if err != nil {
		return nil, false, err
	}
	res, err := tx.Exec(`INSERT INTO worktrees(branch, base, pid, pid_start, mountpoint, state, kind, session, created, updated) VALUES(?,?,?,?,?,?,?,?,?,?)`,
		branch, tip[:], pid, start, mountpoint, StateLive, kind, session, now, now)
	if err != nil {
		return nil, false, fmt.Errorf("create worktree: %w", err)
	}
	id, _ := res.LastInsertId()
	if err := tx.Commit(); err != nil {
		return nil, false, err
	}
	return &Worktree{ID: id, Branch: branch, Base: tip, Pid: pid, PidStart: start, Mountpoint: mountpoint, State: StateLive, Kind: kind, Session: session, Created: now}, false, nil
}

// CreateView records a read-only view of branch's tip served at
// mountpoint by this process (KindView). It claims nothing: sessions on
// the branch go on, and the view keeps serving the commit it began with.
func (r *Repo) CreateView(branch, mountpoint string) (*Worktree, error) {
	tx, err := r.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	tip, err := tx.BranchTip(branch)
	if err != nil {
		return nil, err
	}
	pid := os.Getpid()
	start := ProcessStart(pid)
	now := time.Now().UnixNano()
	res, err := tx.Exec(`INSERT INTO worktrees(branch, base, pid, pid_start, mountpoint, state, kind, session, created, updated) VALUES(?,?,?,?,?,?,?,?,?,?)`,
		branch, tip[:], pid, start, mountpoint, StateLive, KindView, "", now, now)
	if err != nil {
		return nil, fmt.Errorf("create view: %w", err)
	}
	id, _ := res.LastInsertId()
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &Worktree{ID: id, Branch: branch, Base: tip, Pid: pid, PidStart: start, Mountpoint: mountpoint, State: StateLive, Kind: KindView, Created: now}, nil
}

// RemoveView deletes a view whose process died (or the caller's own).
func (r *Repo) RemoveView(w *Worktree) error {
	if w.Kind != KindView {
		return fmt.Errorf("worktree #%d is not a read-only view", w.ID)
	}
	_, err := r.DB.Exec(`DELETE FROM worktrees WHERE id=? AND kind=? AND pid=? AND pid_start=?`, w.ID, KindView, w.Pid, w.PidStart)
	return err
}

// checkNoLiveWorktree refuses to move a branch a live session works on:
// the session's commit at its end would find the branch moved. So does an
// interrupted one (an art mount killed, a recovery that failed): moved
// under it, its work could only go on another branch ('art commit -b').
func (tx *Tx) checkNoLiveWorktree(branch string) error {
	rows, err := tx.Query(`SELECT `+worktreeCols+` FROM worktrees WHERE branch=?`, branch)
	if err != nil {
		return err
	}
	var live []*Worktree
	for rows.Next() {
		w, err := scanWorktree(rows)
		if err != nil {
			rows.Close()
			return err
		}
		live = append(live, w)
	}
	rows.Close()
	for _, w := range live {
		if w.Kind == KindView {
			continue
		}
		if ProcessAlive(w.Pid, w.PidStart) {
			return fmt.Errorf("%w: branch %s is in use by worktree #%d (pid %d), whose commit at its end would find the branch moved; push to another branch with -b NAME, or after the session ends", ErrBranchInUse, branch, w.ID, w.Pid)
		}
		// Its owner is gone: interrupted, whatever the row says (a
		// killed art leaves it "live" until a command's stale cleanup
		// marks it, which may not have run yet).
		return fmt.Errorf("%w: branch %s holds interrupted worktree #%d (an art %s that ended without recording its changes), which a push would leave behind; record it first with 'art commit --worktree %d' (should that fail, 'art run' or 'art mount' on %s continues the worktree, to remove what is in the way), or push to another branch with -b NAME", ErrBranchInUse, branch, w.ID, w.Kind, w.ID, branch)
	}
	return nil
}

// ErrWorktreeTaken is returned when another art process owns, or has
// recorded, a worktree the caller read as its own or as free to recover.
var ErrWorktreeTaken = errors.New("worktree taken over by another art command")

// SetWorktreeState records a state change (e.g. live → interrupted) of w
// as the caller read it: only while the row still names w's owner (pid and
// start time). A command that found a session dead must not mark it
// interrupted after a resumed session claimed it (the mark then stuck, and
// the next command recorded the live session under it).
func (r *Repo) SetWorktreeState(w *Worktree, state string) error {
	_, err := r.DB.Exec(`UPDATE worktrees SET state=?, updated=? WHERE id=? AND pid=? AND pid_start=?`, state, time.Now().UnixNano(), w.ID, w.Pid, w.PidStart)
	return err
}

// ReleaseWorktree hands back w, which this process owns and could not
// record: it becomes interrupted with no owner, its pending changes kept.
// Marking it interrupted alone left this process's pid on it, so the rest
// of the command (an art run after the stale cleanup failed to record a
// worktree on a full disk) found its own branch in use, by itself.
func (r *Repo) ReleaseWorktree(w *Worktree) error {
	res, err := r.DB.Exec(`UPDATE worktrees SET pid=0, pid_start=0, state=?, kind=?, session=?, mountpoint=?, updated=? WHERE id=? AND pid=? AND pid_start=?`,
		StateInterrupted, w.Kind, w.Session, w.Mountpoint, time.Now().UnixNano(), w.ID, w.Pid, w.PidStart)
	if err != nil {
		return fmt.Errorf("release worktree #%d: %w", w.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: worktree #%d is no longer this process's", ErrWorktreeTaken, w.ID)
	}
	w.Pid, w.PidStart, w.State = 0, 0, StateInterrupted
	return nil
}

// AbandonWorktree gives back w, which CreateWorktree gave this process,
// when the session never began (the overlay or the sandbox failed to
// start): one made for it is deleted, as nothing ran in it (left
// interrupted, it was later recorded as a session of a command that never
// ran), and one resumed is released as it was, its pending work kept.
func (r *Repo) AbandonWorktree(w *Worktree) error {
	if w.resumed {
		// As it was: its kind decides whether the next command records
		// it as an interrupted run, and its session record how.
		w.Kind, w.Session, w.Mountpoint = w.prevKind, w.prevSession, w.prevMountpoint
		return r.ReleaseWorktree(w)
	}
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := tx.DeleteWorktree(w); err != nil {
		return err
	}
	return tx.Commit()
}

// SetWorktreeSession replaces the session record of w, which this process
// owns: a session that ended but could not be recorded keeps how it ended
// for the recovery that records it later.
func (r *Repo) SetWorktreeSession(w *Worktree, session string) error {
	_, err := r.DB.Exec(`UPDATE worktrees SET session=?, updated=? WHERE id=? AND pid=? AND pid_start=?`, session, time.Now().UnixNano(), w.ID, w.Pid, w.PidStart)
	if err == nil {
		w.Session = session
	}
	return err
}

// ClaimWorktree makes the calling process the owner of w, an interrupted
// worktree as the caller read it, before it recovers it (art commit, the
// stale cleanup every command runs): in one write transaction, only if the
// row still names the dead owner the caller saw, so that of two commands
// recovering one worktree at once, or a recovery and a resumed session,
// exactly one goes on. The others get ErrWorktreeTaken. Before, art commit
// folded a worktree a resumed mount was writing into, and what the mount
// took after that was lost.
func (r *Repo) ClaimWorktree(w *Worktree) error {
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if w.Kind == KindView {
		return fmt.Errorf("worktree #%d is a read-only view (art mount --ro): it has nothing to record", w.ID)
	}
	var pid int
	var start int64
	err = tx.QueryRow(`SELECT pid, pid_start FROM worktrees WHERE id=?`, w.ID).Scan(&pid, &start)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: worktree #%d was recorded meanwhile (see 'art log')", ErrWorktreeTaken, w.ID)
	}
	if err != nil {
		return fmt.Errorf("claim worktree #%d: %w", w.ID, err)
	}
	if pid != w.Pid || start != w.PidStart || ProcessAlive(pid, start) {
		return fmt.Errorf("%w: worktree #%d is now in use by pid %d (see 'art status')", ErrWorktreeTaken, w.ID, pid)
	}
	me := os.Getpid()
	meStart := ProcessStart(me)
	if _, err := tx.Exec(`UPDATE worktrees SET pid=?, pid_start=?, state=?, updated=? WHERE id=?`, me, meStart, StateLive, time.Now().UnixNano(), w.ID); err != nil {
		return fmt.Errorf("claim worktree #%d: %w", w.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("claim worktree #%d: %w", w.ID, err)
	}
	w.Pid, w.PidStart, w.State = me, meStart, StateLive
	return nil
}

// DeleteWorktree removes w and its upper layer inside tx, only while the
// row names w's owner (the caller): ErrWorktreeTaken otherwise, and the
// caller's transaction must then not commit.
func (tx *Tx) DeleteWorktree(w *Worktree) error {
	res, err := tx.Exec(`DELETE FROM worktrees WHERE id=? AND pid=? AND pid_start=?`, w.ID, w.Pid, w.PidStart)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("%w: worktree #%d is no longer this process's", ErrWorktreeTaken, w.ID)
	}
	return nil
}

// WorktreeRoots names what upper layers reference, for gc: the base
// trees and files of their nodes, and the chunks of their blocks (as
// chunks: see ExtraRoots).
func (r *Repo) WorktreeRoots() (trees, files, chunks []objects.ID, err error) {
	// Type 0 marks a block's chunk (no node type is 0).
	rows, err := r.DB.Query(`SELECT type, base FROM upper_inodes WHERE base IS NOT NULL
		UNION ALL SELECT 0, chunk FROM upper_blocks`)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var typ int
		var b []byte
		if err := rows.Scan(&typ, &b); err != nil {
			return nil, nil, nil, err
		}
		id, err := objects.FromBytes(b)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case typ == 0:
			chunks = append(chunks, id)
		case objects.Type(typ) == objects.TypeDir:
			trees = append(trees, id)
		default:
			files = append(files, id)
		}
	}
	return trees, files, chunks, rows.Err()
}

// ProcessStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), or 0 if unknown.
func ProcessStart(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseInt(f[19], 10, 64)
	return v
}

// ProcessAlive reports whether pid still runs and is the same process
// (same start time), not a later one that reused the number.
func ProcessAlive(pid int, start int64) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie (killed, not yet reaped) serves nothing any more.
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
		return false
	}
	return start == 0 || ProcessStart(pid) == start
}
