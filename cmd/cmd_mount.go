package cmd

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/artproject/art/fuse"
	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

func newMountCmd(g *globals) *cobra.Command {
	var branch string
	var ro, debug bool
	c := &cobra.Command{
		Use:   "mount [-b BRANCH] [--ro] DIR",
		Short: "mount a writable copy-on-write view of a branch at DIR",
		Long: `mount serves the latest commit of BRANCH (default: the current branch) at
DIR, in the foreground. Writes go to the worktree's upper layer in the
repository; Ctrl-C or SIGTERM unmounts and records what changed as a commit
("mount session"). While a process still uses DIR (a shell whose working
directory is in it), art names it and records the session once it lets go;
Ctrl-C again cuts it off. If art dies, the next art command removes the
stale mount and 'art commit' records the pending changes. One live worktree
per branch.

With --ro, DIR serves the branch's latest commit read-only: nothing is
recorded, no pending work of the branch is resumed, and sessions on the
branch go on meanwhile (the view keeps the commit it began with).

The mount serves the commit as it is: when it holds what art pull would
hold back as something git runs on this host (an agent's hooks,
core.fsmonitor), mount names it on stderr first; review it with 'art diff'
before you run git in DIR.

As root on Linux 6.14+, requests reach art over FUSE's io_uring queues, one
per CPU (art turns on /sys/module/fuse/parameters/enable_uring);
ART_FUSE_TRANSPORT=classic serves them through /dev/fuse instead, and
ART_FUSE_TRANSPORT=io_uring fails rather than fall back. 'art run' mounts
the agent's home the same way.`,
		Example: `  mkdir /tmp/view && art mount -b main /tmp/view
  art mount --ro -b attempt-1 /tmp/view`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			outliveClosedOutput()
			// The repository first: opening it removes stale mounts of
			// dead sessions, which may include this mount point.
			r, err := g.openRepo(".")
			if err != nil {
				return err
			}
			defer r.Close()
			mp, err := fuse.CheckMountpoint(args[0])
			if err != nil {
				return err
			}
			if err := fuse.CheckFUSE(); err != nil {
				return err
			}
			if branch == "" {
				h, err := r.Head()
				if err != nil {
					return err
				}
				if h.Detached() {
					return errors.New("HEAD is detached; name a branch with -b (create one with 'art branch NAME')")
				}
				branch = h.Branch
			}
			// An invalid name first: "no such branch bad..x (create it
			// with 'art branch bad..x')" sent the user to a command
			// that refuses the name.
			if err := repo.CheckBranchName(branch); err != nil {
				return err
			}
			tip, err := r.BranchTip(branch)
			if err != nil {
				return fmt.Errorf("%w (create it with 'art branch %s', or list branches with 'art branch')", err, repo.ShellArg(branch))
			}
			if err := warnGitRisks(g, r, tip, branch, mp); err != nil {
				return err
			}
			// From here a signal must not kill art (a mount and a
			// worktree would be left behind): one that comes before the
			// mount is served unmounts it at once.
			guard := guardRecording(g)
			var wt *repo.Worktree
			var resumed bool
			if ro {
				// A view claims nothing and resumes nothing: it serves
				// the branch's tip as committed.
				wt, err = r.CreateView(branch, mp)
			} else {
				wt, resumed, err = r.CreateWorktree(branch, "mount", mp, "")
			}
			if err != nil {
				return err
			}
			giveBack := func() {
				if ro {
					r.RemoveView(wt)
				} else {
					r.AbandonWorktree(wt)
				}
			}
			if resumed {
				fmt.Fprintf(g.stderr, "art: resuming interrupted worktree #%d on %s with its pending changes\n", wt.ID, branch)
				// The check above read the branch tip; what the
				// interrupted session wrote is served unchecked. (Its
				// row count says nothing: after a kill -9 the changes
				// may all be in the journal, replayed on open.)
				fmt.Fprintf(g.stderr, "art: warning: those changes are not checked for what git would run on this host (hooks, config); to have them checked, stop this mount, record them with 'art commit --worktree %d' and mount again\n", wt.ID)
			}
			logger := log.New(g.stderr, "", log.LstdFlags)
			ofs, err := overlay.Open(r, wt, overlay.Options{Log: logger, ReadOnly: ro, Owner: overlay.Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}})
			if err != nil {
				giveBack()
				return err
			}
			srv, err := fuse.Mount(mp, ofs, fuse.Options{AllowOther: os.Geteuid() == 0, Debug: debug, Log: logger})
			if err != nil {
				ofs.Close()
				giveBack()
				return fmt.Errorf("mount %s: %w", mp, err)
			}
			// Handle the signals before saying they are handled: a SIGTERM
			// sent on that line used to kill art with nothing committed.
			if ro {
				fmt.Fprintf(g.stderr, "art: read-only view of %s (%s) mounted at %s (worktree #%d); Ctrl-C or SIGTERM unmounts\n", branch, wt.Base.Short(), mp, wt.ID)
			} else {
				fmt.Fprintf(g.stderr, "art: %s mounted at %s (worktree #%d); Ctrl-C or SIGTERM unmounts and commits\n", branch, mp, wt.ID)
			}
			done := make(chan struct{})
			go func() { srv.Wait(); close(done) }()
			select {
			case <-guard.ch:
			case <-done:
			}
			endMount(g, srv, mp, guard.ch, done)
			guard.record() // further signals wait for the commit
			if ro {
				ofs.Close()
				return r.RemoveView(wt)
			}
			id, err := ofs.Commit(overlay.CommitOptions{Message: "mount session", Session: &objects.Session{Mode: "mount", Version: repo.Version, Start: wt.Created, End: time.Now().UnixNano()}})
			if errors.Is(err, overlay.ErrNothingToCommit) {
				overlay.Discard(r, wt)
				fmt.Fprintln(g.stderr, "art: nothing changed; no commit recorded")
				return nil
			}
			if err != nil {
				r.SetWorktreeState(wt, repo.StateInterrupted)
				return fmt.Errorf("%w (the changes stay in worktree #%d; record them with 'art commit --worktree %d')", err, wt.ID, wt.ID)
			}
			fmt.Fprintf(g.stdout, "[%s %s] mount session\n", branch, id.Short())
			return nil
		},
	}
	c.Flags().StringVarP(&branch, "branch", "b", "", "branch to mount (default: the current branch)")
	c.Flags().BoolVar(&ro, "ro", false, "read-only view of the branch's latest commit; nothing is recorded, nothing is claimed")
	c.Flags().BoolVar(&debug, "debug", false, "log every FUSE request")
	return c
}

// busyRetry is how often a mount still in use is unmounted again.
const busyRetry = 250 * time.Millisecond

// endMount unmounts mp and waits until its serving ends (done). A mount
// still in use (a shell whose working directory is in it, an editor)
// cannot be unmounted: art says by whom and tries again until they let go,
// and a further signal cuts them off (their files fail from then on).
// Before, art detached the mount and waited in silence, for as long as
// they held it, and a further Ctrl-C said it was recording the session.
func endMount(g *globals, srv *fuse.Server, mp string, signals <-chan os.Signal, done <-chan struct{}) {
	err := srv.TryUnmount()
	if err == nil {
		awaitUnmounted(g, srv, mp, signals, done)
		return
	}
	if !errors.Is(err, syscall.EBUSY) {
		// Not busy, failed all the same: as before this waited for
		// nothing, unmount however it can.
		fmt.Fprintf(g.stderr, "art: warning: %s\n", repo.EscapeControls(err.Error()))
		if srv.Unmount() != nil {
			fuse.Abort(mp)
		}
		<-done
		return
	}
	who := strings.Join(fuse.Holders(mp, 5), ", ")
	if who == "" {
		who = "a process art cannot name"
	}
	fmt.Fprintf(g.stderr, "art: %s is still in use (%s); the session is recorded once it is let go, or press Ctrl-C again to cut it off\n", mp, repo.EscapeControls(who))
	tick := time.NewTicker(busyRetry)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if srv.TryUnmount() == nil {
				awaitUnmounted(g, srv, mp, signals, done)
				return
			}
		case <-signals:
			if cutOff(g, mp, func() { fuse.Abort(mp) }, done) {
				return
			}
		}
	}
}

// cutOff answers a further Ctrl-C while users hold the mount at mp: as
// root it ends the connection with abort and waits for the serving to end
// (done), reporting true; without root, which cannot, it says so and
// reports false.
func cutOff(g *globals, mp string, abort func(), done <-chan struct{}) bool {
	if os.Geteuid() != 0 {
		// Only root can end a FUSE connection from outside.
		fmt.Fprintf(g.stderr, "art: cutting %s off needs root; the session is recorded once it is let go\n", mp)
		return false
	}
	fmt.Fprintf(g.stderr, "art: cutting %s off; what is written there from now on is not recorded\n", mp)
	abort()
	<-done
	return true
}

// awaitUnmounted waits, once the mount is gone from art's namespace, for
// its serving to end (done). A copy of the mount in another mount
// namespace keeps the connection: every sandbox an 'art run' starts while
// the mount is up takes one, and art mount waited, silently and deaf to
// Ctrl-C, for as long as that session ran. Nothing of this host uses the
// mount any more: the connection is cut off as soon as such a copy is
// seen, or, where that takes root, left to end with this process, and
// the session is recorded at once. That is what sessions run side by side
// do, so art says nothing of it; only a connection held by something art
// cannot name is reported (cut off after fuse.HeldWait). A copy that a
// process does use (one in a namespace of its own: unshare -m, a
// container) is a user of the mount as any on the host: art names it
// and waits, as for a busy mount, until it lets go or Ctrl-C again cuts
// it off. Cut off at once, what it then wrote, and its mapped pages not
// yet written back, were lost while the session was recorded in silence.
func awaitUnmounted(g *globals, srv *fuse.Server, mp string, signals <-chan os.Signal, done <-chan struct{}) {
	told := false
	tick := time.NewTicker(busyRetry)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		default:
		}
		users := srv.Users(5)
		if len(users) == 0 {
			break
		}
		if !told {
			fmt.Fprintf(g.stderr, "art: %s is unmounted here but still in use in another mount namespace (%s); the session is recorded once it is let go, or press Ctrl-C again to cut it off\n", mp, repo.EscapeControls(strings.Join(users, ", ")))
			told = true
		}
		select {
		case <-done:
			return
		case <-tick.C:
		case <-signals:
			if cutOff(g, mp, srv.Abort, done) {
				return
			}
		}
	}
	aborted, holders := srv.AbortWhenHeld(done, fuse.HeldWait)
	switch {
	case len(holders) > 0:
	case aborted:
		fmt.Fprintf(g.stderr, "art: the mount is gone here, but something art cannot name still held its connection; it was cut off to record the session\n")
	default:
		<-done // without root: until it is let go
	}
}

// maxGitRisksShown bounds the paths warnGitRisks lists.
const maxGitRisksShown = 10

// warnGitRisks warns when the commit a mount serves holds what git would
// run on this host and no push of the user's made (an agent's hook,
// core.fsmonitor, a .git file leading elsewhere), the things pull holds
// back: in the mount they are live, and git run there, by the user and as
// the user, runs them.
func warnGitRisks(g *globals, r *repo.Repo, tip objects.ID, branch, mp string) error {
	c, err := r.LoadCommit(tip)
	if err != nil {
		return err
	}
	root, err := r.LoadTree(c.Tree)
	if err != nil {
		return err
	}
	var risks []string
	for _, e := range root.Entries {
		if e.Type != objects.TypeDir {
			continue
		}
		found, err := r.GitRisks(tip, e.Name)
		if err != nil {
			// Only a warning: a mount of a damaged commit still serves
			// what it can (art fsck names the damage).
			fmt.Fprintf(g.stderr, "art: warning: could not check %s for what git would run: %s\n", repo.QuotePath(e.Name), repo.EscapeControls(err.Error()))
			continue
		}
		for _, f := range found {
			risks = append(risks, repo.QuotePath(e.Name)+"/"+f)
		}
	}
	if len(risks) == 0 {
		return nil
	}
	more := ""
	if len(risks) > maxGitRisksShown {
		more = fmt.Sprintf("\n  … and %d more", len(risks)-maxGitRisksShown)
		risks = risks[:maxGitRisksShown]
	}
	fmt.Fprintf(g.stderr, "art: warning: %s holds what git would run on this host, made by no push of yours (as art pull holds it back):\n  %s%s\nart: review it with 'art diff' before you run git in %s\n", branch, strings.Join(risks, "\n  "), more, mp)
	return nil
}

func newCommitCmd(g *globals) *cobra.Command {
	var msg, branch string
	var wtID int64
	c := &cobra.Command{
		Use:   "commit [-M MSG] [--worktree ID] [-b NEW-BRANCH]",
		Short: "record the pending changes of an interrupted worktree",
		Long: `commit records what an interrupted session (art run or art mount whose
process died) left in its worktree as a commit on its branch. With one
interrupted worktree, --worktree is optional; 'art status' lists them.
With -b, the commit goes on a new branch started at the worktree's base
commit: the way to keep the work when its branch moved meanwhile. A
worktree that holds no changes is removed (and the command says so, with
a non-zero exit). Until then, art push refuses the worktree's branch. If
the worktree cannot be recorded (a damaged chunk, no room), 'art run' or
'art mount' on its branch continues it, to remove what is in the way.`,
		Example: `  art status
  art commit --worktree 3 -M "recovered session"
  art commit --worktree 3 -b rescued`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r, err := g.openRepo(".")
			if err != nil {
				return err
			}
			defer r.Close()
			wts, err := r.Worktrees()
			if err != nil {
				return err
			}
			var wt *repo.Worktree
			for _, w := range wts {
				if w.Kind == repo.KindView {
					if w.ID == wtID {
						return fmt.Errorf("worktree #%d is a read-only view (art mount --ro of %s): it has nothing to record", w.ID, w.Branch)
					}
					continue
				}
				if (wtID == 0 || w.ID == wtID) && w.State == repo.StateInterrupted {
					if wt != nil {
						return fmt.Errorf("several interrupted worktrees (#%d, #%d, ...); pick one with --worktree ID (see 'art status')", wt.ID, w.ID)
					}
					wt = w
				}
			}
			if wt == nil {
				if wtID != 0 {
					for _, w := range wts {
						if w.ID == wtID {
							return fmt.Errorf("worktree #%d is live (pid %d); it records its own commit when it ends", w.ID, w.Pid)
						}
					}
					return fmt.Errorf("%w: #%d (see 'art status')", repo.ErrNoWorktree, wtID)
				}
				return errors.New("nothing to commit: no interrupted worktree (see 'art status')")
			}
			// What would refuse the commit is checked before the
			// claim: claiming and opening the worktree replays its
			// journal into SQLite, clears its owner and marks it
			// updated, so a refused 'commit -b main' changed the
			// repository. The fold checks again under the write lock.
			if err := checkCommitTarget(r, wt, branch); err != nil {
				return err
			}
			return commitWorktree(g, r, wt, msg, branch, g.stdout)
		},
	}
	c.Flags().StringVarP(&msg, "message", "M", "", "commit message (default: the session's, marked interrupted)")
	c.Flags().Int64Var(&wtID, "worktree", 0, "worktree id (see 'art status')")
	c.Flags().StringVarP(&branch, "branch", "b", "", "record on this new branch, started at the worktree's base")
	return c
}

// commitWorktree records an interrupted worktree as a commit.
// With branch set, the commit goes on that new branch, started at the
// worktree's base.
// The result line goes to out: stdout for art commit, as push and mount
// print theirs; stderr when another command records a dead session in
// passing (its stdout is its own output).
func commitWorktree(g *globals, r *repo.Repo, wt *repo.Worktree, msg, branch string, out io.Writer) (err error) {
	// Claimed first: another command may be recovering it too, or a
	// session resuming it (repo.ClaimWorktree).
	if err := r.ClaimWorktree(wt); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Still ours: left as it was, with no owner (this process
			// goes on, and must not find the branch in use by itself).
			r.ReleaseWorktree(wt)
			if repo.IsFull(err) || errors.Is(err, syscall.ENOSPC) {
				r.ShrinkWAL() // give the room the attempt took back
			}
		}
	}()
	ofs, err := overlay.Open(r, wt, overlay.Options{Log: log.New(g.stderr, "", log.LstdFlags)})
	if err != nil {
		return err
	}
	sess, defMsg := interruptedSession(wt)
	if msg == "" {
		msg = defMsg
	}
	allowEmpty := wt.Kind == "run" // every session is recorded, even an empty one
	id, err := ofs.Commit(overlay.CommitOptions{Message: msg, Session: sess, AllowEmpty: allowEmpty, Branch: branch})
	if errors.Is(err, overlay.ErrNothingToCommit) {
		// Its journal replayed and nothing in it: kept, it stayed in
		// art status for good and kept push off its branch.
		if err := overlay.Discard(r, wt); err != nil {
			// It stays, interrupted, in art status: the message says
			// how to remove it once the cause is gone.
			return fmt.Errorf("nothing to commit: worktree #%d has no changes, but removing it failed: %w; it stays as it was (see 'art status'): once the cause is fixed, 'art commit --worktree %d' removes it", wt.ID, err, wt.ID)
		}
		return fmt.Errorf("nothing to commit: worktree #%d had no changes; removed it", wt.ID)
	}
	if err != nil {
		return err
	}
	if branch == "" {
		branch = wt.Branch
	}
	fmt.Fprintf(out, "[%s %s] %s\n", branch, id.Short(), firstLine(msg))
	return nil
}

// checkCommitTarget refuses, before anything is touched, a commit of
// worktree wt that overlay's fold would refuse: on a new branch (-b) an
// invalid or existing name, on the worktree's own branch one that is gone
// or has moved from the worktree's base. The messages are the fold's.
func checkCommitTarget(r *repo.Repo, wt *repo.Worktree, branch string) error {
	if branch != "" {
		if err := repo.CheckBranchName(branch); err != nil {
			return err
		}
		if tip, err := r.BranchTip(branch); err == nil {
			return fmt.Errorf("commit worktree #%d: branch %s already exists (at %s); name a new branch", wt.ID, branch, tip.Short())
		} else if !errors.Is(err, repo.ErrNoBranch) {
			return err
		}
		return nil
	}
	tip, err := r.BranchTip(wt.Branch)
	if err != nil {
		return fmt.Errorf("commit worktree #%d: %w", wt.ID, err)
	}
	if tip != wt.Base {
		return fmt.Errorf("commit worktree #%d: branch %s moved from %s to %s while the worktree was open; record the work on a new branch with 'art commit --worktree %d -b NEW'",
			wt.ID, wt.Branch, wt.Base.Short(), tip.Short(), wt.ID)
	}
	return nil
}
