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
		{"tgt\u202efdp.exe \u2066x\u2069 \u200f", "tgt<U+202E>fdp.exe <U+2066>x<U+2069> <U+200F>"},
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
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	run := func(stdout io.Writer, args ...string) { t.Helper(); artTo(t, ws, stdout, args...) }
	run(io.Discard, "init", "-m", ws)
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("one\n"), 0o644)
	run(io.Discard, "push", "-m", ws, "-q")
	const evil = "\x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07"
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("one\n"+evil+"\n"), 0o644)
	os.Symlink(evil, filepath.Join(ws, "link"))
	run(io.Discard, "push", "-m", ws, "-q")

	screen := onTerminal(t, func(tty io.Writer) { run(tty, "diff") })
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

// onTerminal returns what fn writes to a terminal (a pty's other side).
func onTerminal(t *testing.T, fn func(tty io.Writer)) *bytes.Buffer {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: no pty: %v", err)
	}
	defer ptm.Close()
	var screen bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&screen, ptm); close(done) }()
	fn(tty)
	tty.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pty output did not end")
	}
	return &screen
}

// TestMessagesOnTerminalShowControls: a commit message can be an agent's
// text (-M from an orchestrator, the argv of "run: sh -c ..."); art log,
// show and branch printed its window-title, clipboard and erase-line
// sequences raw to the terminal. Piped, the message keeps its bytes.
func TestMessagesOnTerminalShowControls(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	run := func(stdout io.Writer, args ...string) { t.Helper(); artTo(t, ws, stdout, args...) }
	const evil = "fix\x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07\r\x1b[2Kall tests pass \u202eexe.txt"
	run(io.Discard, "init", "-m", ws)
	os.WriteFile(filepath.Join(ws, "f"), []byte("x\n"), 0o644)
	run(io.Discard, "push", "-q", "-m", ws, "-M", evil+"\nsecond "+evil)
	for _, args := range [][]string{{"log"}, {"log", "--oneline"}, {"show", "HEAD"}, {"branch"}} {
		screen := onTerminal(t, func(tty io.Writer) { run(tty, args...) }).String()
		if strings.Contains(screen, "\x1b]") || strings.Contains(screen, "\x1b[2K") || strings.Contains(screen, "\u202e") {
			t.Errorf("art %s: the message's controls reached the terminal:\n%q", strings.Join(args, " "), screen)
		}
		if !strings.Contains(screen, "fix^[]0;PWNED^G^[]52;c;ZXZpbA==^G^M^[[2Kall tests pass <U+202E>exe.txt") {
			t.Errorf("art %s: the message is not shown:\n%q", strings.Join(args, " "), screen)
		}
	}
	var piped bytes.Buffer
	run(&piped, "log")
	if !strings.Contains(piped.String(), "    "+evil+"\n    second "+evil+"\n") {
		t.Errorf("piped, the message lost its bytes:\n%q", piped.String())
	}
}

// artTo runs art ARGS in ws with its output to stdout (a terminal, or a
// buffer), failing the test if art fails.
func artTo(t *testing.T, ws string, stdout io.Writer, args ...string) {
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
