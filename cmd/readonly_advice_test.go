package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/artproject/art/internal/testenv"
)

// A repository whose -wal file is append-only (chattr +a) opens read-only:
// the advice names that file and the way out, not the permissions.
func TestReadOnlyAdviceNamesTheLog(t *testing.T) {
	db := garbageRepo(t)
	testenv.Chattr(t, "+a", db+"-wal")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"gc", "-d", db}, strings.NewReader(""), &stdout, &stderr)
	if code == 0 {
		t.Fatalf("art gc beside an append-only log succeeded:\n%s%s", &stdout, &stderr)
	}
	if want := db + "-wal is immutable or append-only"; !strings.Contains(stderr.String(), want) {
		t.Errorf("art gc does not say %q:\n%s", want, &stderr)
	}
}
