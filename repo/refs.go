package repo

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/artproject/art/objects"
)

// Ref errors.
var (
	ErrBranchExists  = errors.New("branch already exists")
	ErrNoBranch      = errors.New("no such branch")
	ErrBadBranchName = errors.New("invalid branch name")
	ErrCurrentBranch = errors.New("cannot delete the current branch")
	ErrBranchInUse   = errors.New("branch in use")
	ErrNoCommits     = errors.New("no commits yet")
)

// CheckBranchName applies git's check-ref-format rules to a branch name.
func CheckBranchName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s (git's check-ref-format rules apply)", ErrBadBranchName, name, why)
	}
	switch {
	case name == "":
		return bad("empty")
	case name == "@" || name == "HEAD":
		return bad("reserved name")
	case strings.HasPrefix(name, "-"):
		return bad("starts with '-'")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return bad("starts or ends with '/'")
	case strings.HasSuffix(name, "."):
		return bad("ends with '.'")
	case strings.Contains(name, ".."):
		return bad("contains '..'")
	case strings.Contains(name, "//"):
		return bad("contains '//'")
	case strings.Contains(name, "@{"):
		return bad("contains '@{'")
	case len(name) > 200:
		return bad("longer than 200 bytes")
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return bad(fmt.Sprintf("contains %q", c))
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if strings.HasPrefix(comp, ".") {
			return bad("a component starts with '.'")
		}
		if strings.HasSuffix(comp, ".lock") {
			return bad("a component ends with '.lock'")
		}
	}
	return nil
}

// Head describes HEAD: on a branch (possibly without commits yet) or
// detached at a commit.
type Head struct {
	Branch string     // "" when detached
	Commit objects.ID // Zero on an unborn branch
}

// Detached reports whether HEAD points at a commit rather than a branch.
func (h Head) Detached() bool { return h.Branch == "" }

type querier interface {
	QueryRow(query string, args ...any) *sql.Row
}

func readHead(q querier) (Head, error) {
	var v string
	err := q.QueryRow(`SELECT value FROM meta WHERE key='head'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return Head{}, errNoHeadRow("read HEAD")
	}
	if err != nil {
		return Head{}, fmt.Errorf("read HEAD: %w", err)
	}
	if b, ok := strings.CutPrefix(v, "ref:"); ok {
		id, err := branchTip(q, b)
		if errors.Is(err, ErrNoBranch) {
			return Head{Branch: b}, nil
		}
		return Head{Branch: b, Commit: id}, err
	}
	id, err := objects.ParseID(v)
	if err != nil {
		return Head{}, fmt.Errorf("read HEAD: %w: %v", objects.ErrCorrupt, err)
	}
	return Head{Commit: id}, nil
}

// Head returns the current HEAD.
func (r *Repo) Head() (Head, error) { return readHead(r.DB) }

// Head returns HEAD as seen by this transaction.
func (tx *Tx) Head() (Head, error) { return readHead(tx) }

func branchTip(q querier, name string) (objects.ID, error) {
	var b []byte
	err := q.QueryRow(`SELECT commit_id FROM refs WHERE name=?`, name).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return objects.Zero, fmt.Errorf("%w: %s", ErrNoBranch, name)
	}
	if err != nil {
		return objects.Zero, fmt.Errorf("read branch %s: %w", name, err)
	}
	return objects.FromBytes(b)
}

// BranchTip returns the commit a branch points at.
func (r *Repo) BranchTip(name string) (objects.ID, error) { return branchTip(r.DB, name) }

// BranchTip returns the commit a branch points at, inside the transaction.
func (tx *Tx) BranchTip(name string) (objects.ID, error) { return branchTip(tx, name) }

// Branch is one branch and its tip.
type Branch struct {
	Name   string
	Commit objects.ID
}

// Branches lists branches sorted by name.
func (r *Repo) Branches() ([]Branch, error) { return listBranches(r.DB) }

func listBranches(q rowsQuerier) ([]Branch, error) {
	rows, err := q.Query(`SELECT name, commit_id FROM refs ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list branches: %w", err)
	}
	defer rows.Close()
	var out []Branch
	for rows.Next() {
		var b Branch
		var id []byte
		if err := rows.Scan(&b.Name, &id); err != nil {
			return nil, err
		}
		if b.Commit, err = objects.FromBytes(id); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// SetBranch points a branch at a commit, creating it if needed.
func (tx *Tx) SetBranch(name string, id objects.ID) error {
	if err := CheckBranchName(name); err != nil {
		return err
	}
	if err := tx.checkOpen(); err != nil {
		return fmt.Errorf("update branch %s: %w", name, err)
	}
	if err := tx.checkCommit(id); err != nil {
		return fmt.Errorf("update branch %s: %w", name, err)
	}
	if _, err := tx.Exec(`INSERT INTO refs(name, commit_id) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET commit_id=excluded.commit_id`, name, id[:]); err != nil {
		return fmt.Errorf("update branch %s: %w", name, err)
	}
	return nil
}

// CreateBranch creates a new branch at a commit.
func (r *Repo) CreateBranch(name string, id objects.ID) error {
	if err := CheckBranchName(name); err != nil {
		return err
	}
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.BranchTip(name); err == nil {
		return fmt.Errorf("%w: %s (pick another name, or delete it with 'art branch -d %s')", ErrBranchExists, name, ShellArg(name))
	}
	if err := tx.SetBranch(name, id); err != nil {
		return err
	}
	return tx.Commit()
}

// DeleteBranch deletes a branch and returns the commit it pointed at.
func (r *Repo) DeleteBranch(name string) (objects.ID, error) {
	tx, err := r.Begin()
	if err != nil {
		return objects.Zero, err
	}
	defer tx.Rollback()
	id, err := tx.BranchTip(name)
	if err != nil {
		return objects.Zero, fmt.Errorf("%w (list branches with 'art branch')", err)
	}
	h, err := tx.Head()
	if err != nil {
		return objects.Zero, err
	}
	if h.Branch == name {
		return objects.Zero, fmt.Errorf("%w %s (check out another branch first: 'art checkout OTHER')", ErrCurrentBranch, name)
	}
	var live int
	tx.QueryRow(`SELECT count(*) FROM worktrees WHERE branch=? AND kind!=?`, name, KindView).Scan(&live)
	if live > 0 {
		return objects.Zero, fmt.Errorf("%w: %s has %d worktree(s) (finish or commit them first; see 'art status')", ErrBranchInUse, name, live)
	}
	if _, err := tx.Exec(`DELETE FROM refs WHERE name=?`, name); err != nil {
		return objects.Zero, fmt.Errorf("delete branch %s: %w", name, err)
	}
	return id, tx.Commit()
}

// SetHead points HEAD at a branch (attached) or a commit (detached).
func (tx *Tx) SetHead(h Head) error {
	v := "ref:" + h.Branch
	if h.Branch == "" {
		v = h.Commit.String()
		// HEAD lives in meta, where no foreign key guards it.
		if err := tx.checkCommit(h.Commit); err != nil {
			return fmt.Errorf("update HEAD: %w", err)
		}
	}
	res, err := tx.Exec(`UPDATE meta SET value=? WHERE key='head'`, v)
	if err != nil {
		return fmt.Errorf("update HEAD: %w", err)
	}
	// No row updated is a repository without HEAD, which art never
	// writes: art checkout said it had switched while nothing changed.
	// The row is not made here: whatever removed it may have damaged
	// more, which art fsck shows.
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update HEAD: %w", err)
	} else if n == 0 {
		return errNoHeadRow("update HEAD")
	}
	return nil
}

// errNoHeadRow is the error for a meta table without its head row.
func errNoHeadRow(op string) error {
	return fmt.Errorf("%s: %w: its meta table has no head row (see what else is wrong with 'art fsck'; restore the repository from a backup)", op, ErrDamaged)
}

// Advance records a new commit on the branch HEAD points to, or moves a
// detached HEAD, inside the transaction.
func (tx *Tx) Advance(branch string, id objects.ID) error {
	if branch == "" {
		return tx.SetHead(Head{Commit: id})
	}
	return tx.SetBranch(branch, id)
}

// checkCommit makes sure, inside the transaction, that commit id is in the
// repository: a revision resolved before the transaction began may name a
// commit an art gc has removed since (it holds the write lock while it
// runs), and a ref to it would leave the repository broken.
func (tx *Tx) checkCommit(id objects.ID) error {
	var one int
	err := tx.QueryRow(`SELECT 1 FROM commits WHERE id=?`, id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("commit %s is not in the repository (an art gc may just have removed it as unreachable); check the revision with 'art log --all'", id.Short())
	}
	if err != nil {
		return fmt.Errorf("look up commit %s: %w", id.Short(), err)
	}
	return nil
}

// errTxEnded is a transaction SQLite rolled back by itself.
var errTxEnded = errors.New("the transaction ended before its commit (SQLite rolled it back, e.g. on a full disk); nothing was recorded")

// checkOpen fails when SQLite has ended tx by itself: on some errors (a
// full disk) it rolls the whole transaction back, and every later
// statement runs, and commits, on its own. A branch moved then pointed at
// a commit whose trees were rolled back, and the worktree's work looked
// recorded. BEGIN is refused inside a live transaction; one it starts
// is rolled back at once.
func (tx *Tx) checkOpen() error {
	_, err := tx.Exec(`BEGIN`)
	if err != nil {
		if strings.Contains(err.Error(), "within a transaction") {
			return nil
		}
		return err
	}
	tx.Exec(`ROLLBACK`)
	return errTxEnded
}
