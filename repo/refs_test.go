package repo

import (
	"errors"
	"testing"
)

// A branch is never moved outside its transaction: when SQLite ended the
// transaction by itself (a full disk rolls it back), SetBranch refuses
// instead of committing the move on its own.
func TestSetBranchAfterTheTransactionEnded(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	id := push(t, r, ws, "v1").Commit
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.SetBranch("live", id); err != nil {
		t.Fatalf("in a live transaction: %v", err)
	}
	if _, err := tx.Exec(`ROLLBACK`); err != nil { // as SQLite does on SQLITE_FULL
		t.Fatal(err)
	}
	if err := tx.SetBranch("after", id); !errors.Is(err, errTxEnded) {
		t.Fatalf("SetBranch after the transaction ended: %v", err)
	}
	if _, err := r.BranchTip("after"); !errors.Is(err, ErrNoBranch) {
		t.Fatalf("the branch was created on its own: %v", err)
	}
}
