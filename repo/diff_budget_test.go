package repo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The work budget shared by the pieces of one diff (maxDiffWork) runs
// out: the pieces after it are shown replaced whole, and the diff is still
// correct, only coarser. Five pieces of 2^14 lines a side between unique
// anchor lines, each one line changed: the first four take the whole
// budget (2^28 each), the fifth is over it. patch(1) applies the unified
// diff to the old text and gets the new one.
func TestLineDiffWorkBudgetRunsOut(t *testing.T) {
	const side = 1 << 14 // lines of each piece, each side: side*side == maxPieceProduct
	if side*side != maxPieceProduct || 4*maxPieceProduct != maxDiffWork {
		t.Fatalf("the constants changed: rework the test (piece %d, budget %d)", maxPieceProduct, maxDiffWork)
	}
	var a, b strings.Builder
	for p := range 5 {
		if p > 0 {
			fmt.Fprintf(&a, "anchor %d\n", p)
			fmt.Fprintf(&b, "anchor %d\n", p)
		}
		change := side / 2
		switch p {
		case 0:
			change = 0 // not in a common prefix
		case 4:
			change = side - 1 // nor in a common suffix
		}
		for i := range side {
			a.WriteString("x\n")
			if i == change {
				b.WriteString("y\n")
			} else {
				b.WriteString("x\n")
			}
		}
	}
	start := time.Now()
	hunks, st := unified(a.String(), b.String(), 3)
	t.Logf("%d hunks, +%d -%d in %v", len(hunks), st.Added, st.Deleted, time.Since(start))
	// Four pieces diffed line by line, the fifth replaced whole.
	if st.Added != 4+side || st.Deleted != 4+side {
		t.Errorf("+%d -%d; want +%d -%d (the budget did not run out where it should)", st.Added, st.Deleted, 4+side, 4+side)
	}
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("no patch(1)")
	}
	dir := t.TempDir()
	old := filepath.Join(dir, "f")
	if err := os.WriteFile(old, []byte(a.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	diff := "--- a/f\n+++ b/f\n" + strings.Join(hunks, "")
	if err := os.WriteFile(filepath.Join(dir, "f.diff"), []byte(diff), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("patch", "--batch", "--fuzz=0", "-p1", "-i", "f.diff")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s", err, out)
	}
	got, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != b.String() {
		t.Fatalf("the patched text is not the new one (%d bytes, want %d)", len(got), b.Len())
	}
}
