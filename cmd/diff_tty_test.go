package cmd

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

func TestVisibleControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\tand tab", "plain text\tand tab"},
		{"é ü 日本", "é ü 日本"},
		{"\x1b]0;PWNED\x07\x1b[31m", "^[]0;PWNED^G^[[31m"},
		{"\x1b]52;c;ZXZpbA==\x07", "^[]52;c;ZXZpbA==^G"},
		{"del\x7f", "del^?"},
		{"c1 \u009b31m", "c1 <U+009B>31m"},
		{"latin1 \xe9 \x9b", "latin1 <E9> <9B>"},
		{"\r\x00", "^M^@"},
	} {
		if got := visibleControls(tc.in); got != tc.want {
			t.Errorf("visibleControls(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDiffOnTerminalShowsControls: an agent's file content and link
// target reach art diff's output; on a terminal their escape sequences
// (a window title, an OSC 52 clipboard write) are shown, not obeyed.
// Piped, the patch keeps its bytes.
func TestDiffOnTerminalShowsControls(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	run := func(stdout io.Writer, args ...string) {
		t.Helper()
		c := exec.Command(artBinary(t), args...)
		c.Dir = ws
		c.Env = append(artEnv(), "TERM=xterm")
		var stderr bytes.Buffer
		c.Stdout, c.Stderr = stdout, &stderr
		if err := c.Run(); err != nil {
			t.Fatalf("art %q: %v\n%s", args, err, stderr.String())
		}
	}
	run(io.Discard, "init", "-m", ws)
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("one\n"), 0o644)
	run(io.Discard, "push", "-m", ws, "-q")
	const evil = "\x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07"
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("one\n"+evil+"\n"), 0o644)
	os.Symlink(evil, filepath.Join(ws, "link"))
	run(io.Discard, "push", "-m", ws, "-q")

	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: no pty: %v", err)
	}
	defer ptm.Close()
	var screen bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&screen, ptm); close(done) }()
	run(tty, "diff")
	tty.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pty output did not end")
	}
	if bytes.Contains(screen.Bytes(), []byte("\x1b]")) {
		t.Errorf("an escape sequence of the agent's reached the terminal:\n%q", screen.String())
	}
	if !strings.Contains(screen.String(), "+^[]0;PWNED^G^[]52;c;ZXZpbA==^G") {
		t.Errorf("the content is not shown:\n%q", screen.String())
	}
	var piped bytes.Buffer
	run(&piped, "diff")
	if !strings.Contains(piped.String(), "+"+evil+"\n") {
		t.Errorf("piped, the patch lost its bytes:\n%q", piped.String())
	}
}
