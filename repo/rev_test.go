package repo

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artproject/art/objects"
)

// putCommit stores a commit with the empty tree and the given parents.
func putCommit(t testing.TB, r *Repo, msg string, time int64, parents ...objects.ID) objects.ID {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	tree, err := tx.EmptyTree()
	if err != nil {
		t.Fatal(err)
	}
	id, err := tx.PutCommit(&objects.Commit{Tree: tree, Parents: parents, Time: time, Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

func setBranch(t testing.TB, r *Repo, name string, id objects.ID) {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.SetBranch(name, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// collidingCommits finds two commit messages whose commits (empty tree,
// given parent) share the first 4 hex digits of their ids.
func collidingCommits(t testing.TB, tree, parent objects.ID) (string, string, string) {
	t.Helper()
	seen := map[string]string{}
	for i := 0; i < 1<<20; i++ {
		msg := fmt.Sprintf("attempt %d", i)
		_, id, err := objects.EncodeCommit(&objects.Commit{Tree: tree, Parents: []objects.ID{parent}, Time: 5, Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		p := id.String()[:4]
		if other, ok := seen[p]; ok {
			return other, msg, p
		}
		seen[p] = msg
	}
	t.Fatal("no collision found")
	return "", "", ""
}

func TestResolve(t *testing.T) {
	r := newTestRepo(t)
	c1 := putCommit(t, r, "one", 1)
	c2 := putCommit(t, r, "two", 2, c1)
	c3 := putCommit(t, r, "three", 3, c2)
	side := putCommit(t, r, "side", 4, c1)
	merge := putCommit(t, r, "merge", 5, c3, side)
	setBranch(t, r, "main", merge)
	setBranch(t, r, "feature/x", side)
	// A branch whose name looks like a commit prefix wins, as in git.
	setBranch(t, r, c1.String()[:6], c3)

	tx, _ := r.Begin()
	empty, _ := tx.EmptyTree()
	tx.Rollback()
	m1, m2, prefix := collidingCommits(t, empty, c1)
	a1 := putCommit(t, r, m1, 5, c1)
	a2 := putCommit(t, r, m2, 5, c1)

	tests := []struct {
		rev  string
		want objects.ID
		err  error // nil: success
	}{
		{"HEAD", merge, nil},
		{"@", merge, nil},
		{"main", merge, nil},
		{"feature/x", side, nil},
		{merge.String(), merge, nil},
		{c2.String()[:12], c2, nil},
		{strings.ToUpper(c2.String()[:10]), c2, nil},
		{c1.String()[:6], c3, nil}, // the branch, not the commit
		{"HEAD~1", c3, nil},
		{"HEAD~", c3, nil},
		{"HEAD^", c3, nil},
		{"HEAD^1", c3, nil},
		{"HEAD^2", side, nil},
		{"HEAD^2~1", c1, nil},
		{"HEAD~2", c2, nil},
		{"HEAD~3", c1, nil},
		{"HEAD^^^", c1, nil},
		{"main~1^", c2, nil},
		{"HEAD~0", merge, nil},
		{"HEAD^0", merge, nil},
		{c3.String() + "~2", c1, nil},
		{"feature/x^", c1, nil},
		{"HEAD~1^2", objects.Zero, ErrUnknownRev}, // c3 has one parent
		{"HEAD^3", objects.Zero, ErrUnknownRev},
		{"HEAD~100", objects.Zero, ErrUnknownRev},
		{"HEAD~4", objects.Zero, ErrUnknownRev},
		{"HEAD~99999999999999999999", objects.Zero, ErrUnknownRev},
		{"nope", objects.Zero, ErrUnknownRev},
		{"", objects.Zero, ErrUnknownRev},
		{"abc", objects.Zero, ErrUnknownRev},        // too short for a prefix
		{"zzzz", objects.Zero, ErrUnknownRev},       // not hex
		{"ffffffffff", objects.Zero, ErrUnknownRev}, // no such commit (almost surely)
		{merge.String() + "0", objects.Zero, ErrUnknownRev},
		{"HEAD~x", objects.Zero, ErrUnknownRev},    // regression: used to mean HEAD~2
		{"HEAD~1foo", objects.Zero, ErrUnknownRev}, // regression: used to walk 4 parents
		{"main@{1}", objects.Zero, ErrUnknownRev},
		{prefix, objects.Zero, ErrAmbiguousRev},
	}
	for _, tc := range tests {
		t.Run(tc.rev, func(t *testing.T) {
			got, err := r.Resolve(tc.rev)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("resolved to %s, want %v", got.Short(), tc.err)
				}
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %s, %v; want %s", got.Short(), err, tc.want.Short())
			}
		})
	}
	// Errors say why and what to look at: how much history there is,
	// not "commit X has 0 parent(s)"; that a prefix of a commit id is
	// too short, not that it is no commit id.
	for _, tc := range []struct{ rev, says string }{
		{"HEAD~4", `unknown revision "HEAD~4": the history of HEAD has only 3 commits before it (see 'art log HEAD')`},
		{"HEAD~100", "the history of HEAD has only 3 commits before it"},
		{"HEAD^2~2", `unknown revision "HEAD^2~2": the history of HEAD^2 has only 1 commit before it (see 'art log HEAD^2')`},
		{c1.String()[:12] + "~1", "is the first commit of its history (see 'art log " + c1.String()[:12] + "')"},
		{"HEAD^3", `unknown revision "HEAD^3": HEAD (` + merge.Short() + `) has 2 parents, so no ^3 (see 'art show HEAD')`},
		{"HEAD~1^2", "HEAD~1 (" + c3.Short() + ") has 1 parent, so no ^2"},
		{c2.String()[:3], `unknown revision "` + c2.String()[:3] + `": not a branch or HEAD, and a commit id prefix needs at least 4 hex digits (see 'art log --all')`},
		{"nope", "not a branch, HEAD or commit id"},
	} {
		_, err := r.Resolve(tc.rev)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Resolve(%q) = %v; want it to say %q", tc.rev, err, tc.says)
		}
	}
	// The ambiguity error lists the candidates with their messages.
	_, err := r.Resolve(prefix)
	for _, want := range []string{a1.String()[:16], a2.String()[:16], m1, m2, "use more digits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ambiguity message lacks %q:\n%v", want, err)
		}
	}
	// One more digit disambiguates, unless the ids share it too.
	for _, id := range []objects.ID{a1, a2} {
		n := 5
		for strings.HasPrefix(a1.String(), id.String()[:n]) && strings.HasPrefix(a2.String(), id.String()[:n]) {
			n++
		}
		if got, err := r.Resolve(id.String()[:n]); err != nil || got != id {
			t.Errorf("Resolve(%s) = %v, %v", id.String()[:n], got.Short(), err)
		}
	}
	// Detached HEAD.
	tx, _ = r.Begin()
	tx.SetHead(Head{Commit: c2})
	tx.Commit()
	if got, err := r.Resolve("HEAD~1"); err != nil || got != c1 {
		t.Fatalf("detached HEAD~1 = %v, %v", got.Short(), err)
	}
}

func TestCheckBranchName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"main", true},
		{"feature/login", true},
		{"a.b", true},
		{"attempt-2", true},
		{"v1.0", true},
		{"ünïcode", true},
		{"a@b", true},
		{"foo.lockx", true},
		{"", false},
		{"HEAD", false},
		{"@", false},
		{"-dash", false},
		{"/lead", false},
		{"trail/", false},
		{"a//b", false},
		{"dot.", false},
		{"a..b", false},
		{".hidden", false},
		{"a/.hidden", false},
		{"x.lock", false},
		{"a/b.lock/c", false},
		{"a@{1}", false},
		{"sp ace", false},
		{"tab\t", false},
		{"nl\n", false},
		{"del\x7f", false},
		{"tilde~1", false},
		{"caret^", false},
		{"co:lon", false},
		{"q?", false},
		{"star*", false},
		{"br[acket", false},
		{"back\\slash", false},
		{strings.Repeat("a", 201), false},
	}
	for _, tc := range tests {
		err := CheckBranchName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckBranchName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadBranchName) {
			t.Errorf("CheckBranchName(%q) error %v does not wrap ErrBadBranchName", tc.name, err)
		}
	}
}

func TestBranches(t *testing.T) {
	r := newTestRepo(t)
	c1 := putCommit(t, r, "one", 1)
	c2 := putCommit(t, r, "two", 2, c1)
	setBranch(t, r, "main", c2)
	if err := r.CreateBranch("attempt", c1); err != nil {
		t.Fatal(err)
	}
	mustFail(t, r.CreateBranch("attempt", c2), ErrBranchExists)
	mustFail(t, r.CreateBranch("bad..name", c2), ErrBadBranchName)
	if tip, _ := r.BranchTip("attempt"); tip != c1 {
		t.Fatal("existing branch was moved")
	}
	bs, err := r.Branches()
	if err != nil || len(bs) != 2 || bs[0].Name != "attempt" || bs[1].Name != "main" {
		t.Fatalf("Branches = %+v, %v", bs, err)
	}
	_, err = r.DeleteBranch("main")
	mustFail(t, err, ErrCurrentBranch)
	_, err = r.DeleteBranch("nope")
	mustFail(t, err, ErrNoBranch)
	// A branch with a worktree cannot be deleted.
	if _, _, err := r.CreateWorktree("attempt", "mount", "", ""); err != nil {
		t.Fatal(err)
	}
	_, err = r.DeleteBranch("attempt")
	mustFail(t, err, ErrBranchInUse)
	r.DB.Exec(`DELETE FROM worktrees`)
	id, err := r.DeleteBranch("attempt")
	if err != nil || id != c1 {
		t.Fatalf("DeleteBranch = %v, %v", id.Short(), err)
	}
	if _, err := r.BranchTip("attempt"); !errors.Is(err, ErrNoBranch) {
		t.Fatal("branch still there")
	}
	// Decorations mark HEAD's branch first.
	r.CreateBranch("other", c2)
	deco, err := r.Decorations()
	if err != nil || strings.Join(deco[c2], ",") != "HEAD -> main,other" {
		t.Fatalf("decorations %v, %v", deco[c2], err)
	}
}

// TestRefsToRemovedCommit: a revision resolved before a gc removed its
// commit must not become a ref or a detached HEAD (HEAD, in meta, has no
// foreign key): art checkout did that, and the repository failed fsck.
func TestRefsToRemovedCommit(t *testing.T) {
	r := newTestRepo(t)
	c1 := putCommit(t, r, "one", 1)
	c2 := putCommit(t, r, "two", 2, c1)
	setBranch(t, r, "main", c1)
	// c2 is unreachable: resolved now, removed by the gc below.
	got, err := r.Resolve(c2.String()[:8])
	if err != nil || got != c2 {
		t.Fatalf("Resolve: %v %v", got.Short(), err)
	}
	if _, err := r.GC(nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(tx *Tx) error
	}{
		{"detached HEAD", func(tx *Tx) error { return tx.SetHead(Head{Commit: c2}) }},
		{"new branch", func(tx *Tx) error { return tx.SetBranch("keep", c2) }},
		{"moved branch", func(tx *Tx) error { return tx.SetBranch("main", c2) }},
	} {
		tx, err := r.Begin()
		if err != nil {
			t.Fatal(err)
		}
		err = tc.set(tx)
		tx.Rollback()
		if err == nil || !strings.Contains(err.Error(), "not in the repository") || !strings.Contains(err.Error(), c2.Short()) {
			t.Errorf("%s at a removed commit: %v", tc.name, err)
		}
	}
	if h, err := r.Head(); err != nil || h.Branch != "main" {
		t.Fatalf("HEAD %+v, %v", h, err)
	}
	if tip, _ := r.BranchTip("main"); tip != c1 {
		t.Fatal("main moved")
	}
	// A commit the transaction itself wrote is in the repository.
	tx, _ := r.Begin()
	defer tx.Rollback()
	id := putCommitTx(t, tx, "three", c1)
	if err := tx.SetHead(Head{Commit: id}); err != nil {
		t.Fatal(err)
	}
}

func TestLogOrder(t *testing.T) {
	r := newTestRepo(t)
	c1 := putCommit(t, r, "one", 1)
	c2 := putCommit(t, r, "two", 2, c1)
	side := putCommit(t, r, "side", 3, c1)
	merge := putCommit(t, r, "merge", 4, c2, side)
	log, err := r.Log([]objects.ID{merge}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log {
		got = append(got, e.Commit.Message)
	}
	if strings.Join(got, " ") != "merge side two one" {
		t.Fatalf("log order %v", got)
	}
	if log, _ := r.Log([]objects.ID{merge, c2}, 2); len(log) != 2 {
		t.Fatalf("max 2 gave %d", len(log))
	}
}
