package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// termText returns how text an agent may have written (a commit message,
// an argv) is printed to w: with its controls shown (visibleControls) on
// a terminal, as it is otherwise.
func termText(w io.Writer) func(string) string {
	if isTerminal(w) {
		return visibleControls
	}
	return func(s string) string { return s }
}

// colorOn reports whether to colour output: a terminal and no NO_COLOR.
func colorOn(w io.Writer) bool {
	_, noColor := os.LookupEnv("NO_COLOR")
	return !noColor && isTerminal(w)
}

type palette struct{ on bool }

func (p palette) wrap(code, s string) string {
	if !p.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}
func (p palette) yellow(s string) string { return p.wrap("33", s) }
func (p palette) green(s string) string  { return p.wrap("32", s) }
func (p palette) red(s string) string    { return p.wrap("31", s) }
func (p palette) cyan(s string) string   { return p.wrap("36", s) }
func (p palette) bold(s string) string   { return p.wrap("1", s) }

// jsonName is a name as --json output gives it: as it is when valid
// UTF-8, else quoted as the text output quotes it ("ws/n\377"). JSON
// strings cannot carry other bytes, and encoding/json made every invalid
// byte U+FFFD: an agent's names n\377 and n\376 came out the same, and a
// tool keyed on the path could approve one for the other. A name that
// itself starts with a double quote is quoted too, so that none given as
// it is reads like a quoted one: one name, one string.
func jsonName(name string) string {
	if utf8.ValidString(name) && !strings.HasPrefix(name, `"`) {
		return name
	}
	return repo.QuotePath(name)
}

// jsonNames is jsonName of each of names.
func jsonNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = jsonName(n)
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // for programs, not for a web page: <, > and & as they are
	return enc.Encode(v)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func fmtTime(ns int64) string {
	return time.Unix(0, ns).Local().Format("Mon Jan 2 15:04:05 2006 -0700")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// sessionSummary is the one-line description of how a commit was made.
func sessionSummary(s *objects.Session) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(s.Mode)
	if len(s.Argv) > 0 {
		fmt.Fprintf(&b, " %q", s.Argv)
	}
	switch s.Status {
	case "":
	case "exited":
		fmt.Fprintf(&b, ", exit %d", s.ExitCode)
	case "signaled":
		fmt.Fprintf(&b, ", killed by %s", s.Signal)
	default:
		fmt.Fprintf(&b, ", %s", s.Status)
		if s.ExitCode != 0 {
			fmt.Fprintf(&b, " (exit %d)", s.ExitCode)
		}
	}
	if s.End > s.Start && s.Start > 0 {
		fmt.Fprintf(&b, ", %s", time.Duration(s.End-s.Start).Round(time.Millisecond))
	}
	return b.String()
}

// progressBar draws a one-line progress bar on a terminal.
type progressBar struct {
	w    io.Writer
	last time.Time
	on   bool
}

func newProgress(w io.Writer) *progressBar { return &progressBar{w: w, on: isTerminal(w)} }

func (p *progressBar) update(label string, done, total int64) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	pct := 100.0
	if total > 0 {
		pct = float64(done) * 100 / float64(total)
	}
	n := int(pct / 5)
	fmt.Fprintf(p.w, "\r%s [%-20s] %5.1f%% %s/%s", label, strings.Repeat("#", n), pct, humanBytes(done), humanBytes(total))
}

func (p *progressBar) done() {
	if p.on && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// outliveClosedOutput keeps a write to a closed stdout or stderr pipe
// from killing art (Go's default for fd 1 and 2 is to die of SIGPIPE):
// art mount and art run hold a mount and a session, and died with them
// half done, leaving a stale mount for the next command, when the reader
// of their messages went away (art mount 2>&1 | head -3). The write
// fails instead. Notify, unlike Ignore, is not inherited by the sandbox.
func outliveClosedOutput() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// endSignals are the signals that end a session (and art, by default).
var endSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// recordingGuard catches the signals that end a session for the whole
// of it: while the session runs they are the session's to handle (its
// channel goes to the sandbox, or art mount's loop, so that none falls
// between their handling and the guard's), and once it is being recorded
// (unmount, commit) they are held until art exits. A second Ctrl-C, or a
// terminal closing (SIGHUP), during a long commit killed art there, and
// left the session to the next command as "interrupted", its exit status
// lost; SIGQUIT killed art with a goroutine dump.
type recordingGuard struct {
	ch chan os.Signal
	g  *globals
}

func guardRecording(g *globals) *recordingGuard {
	rg := &recordingGuard{ch: make(chan os.Signal, 4), g: g}
	signal.Notify(rg.ch, endSignals...)
	return rg
}

// record says the session is being recorded: signals from now on are
// held, until art exits (what follows the commit, the clean-up of the
// mount point and the exit, must not be cut short either).
func (rg *recordingGuard) record() {
	go func() {
		said := false
		for range rg.ch {
			if !said {
				said = true
				fmt.Fprintln(rg.g.stderr, "art: recording the session; it ends on its own (kill -9 would leave it to the next art command)")
			}
		}
	}()
}
