package sandbox

import (
	"strings"
	"testing"
	"time"
)

func TestTermModesReset(t *testing.T) {
	tests := []struct {
		name, out, want string
	}{
		{"plain text", "hello\r\nworld\r\n", ""},
		{"no final newline", "hello\r\nworld", "\r\n"},
		{"a final carriage return", "50%\r", ""},
		{"a newline, then modes", "done\r\n\x1b[?25h\x1b[m", ""},
		{"text after the alternate screen", "\x1b[?1049hx\x1b[?1049lprompt> ", "\r\n"},
		{"text on the alternate screen only", "line\r\n\x1b[?1049hx\x1b[?1049l", ""},
		{"left on the alternate screen", "line\r\n\x1b[?1049hxyz", "\x1b[?1049l"},
		{"title only", "\x1b]0;my title\x07\x1b]2;t\x1b\\text\n", ""},
		{"clean vim exit", "\x1b[?1049h\x1b[22;0;0t\x1b[>4;2m\x1b[?1h\x1b=\x1b[?2004h\x1b[?25l\x1b[1mx\x1b[m\x1b[?25h\x1b[?2004l\x1b[?1l\x1b>\x1b[>4;m\x1b[?1049l", ""},
		{"vim killed", "\x1b[?1049h\x1b[>4;2m\x1b[?1h\x1b=\x1b[?2004h\x1b[?1004h\x1b[?25l\x1b[1m-- INSERT --",
			"\x1b[?1049l\x1b[?1l\x1b[?25h\x1b[?1004l\x1b[?2004l\x1b>\x1b[>4m\x1b[m"},
		{"concealed", "\x1b[8m", "\x1b[m"},
		{"colour then reset", "\x1b[31;1mred\x1b[0m\n", ""},
		{"reset then colour", "\x1b[0;1m", "\x1b[m"},
		{"truecolour", "\x1b[38:2::255:0:0m", "\x1b[m"},
		{"line drawing", "\x1b(0lqqk\n", "\x1b(B"},
		{"line drawing ended", "\x1b(0lqqk\x1b(B\n", ""},
		{"shift out", "\x1b)0\x0elqk\n", "\x0f"},
		{"mouse", "\x1b[?1000;1006h", "\x1b[?1000l\x1b[?1006l"},
		{"sync output", "\x1b[?2026h\x1b[?1049h", "\x1b[?2026l\x1b[?1049l"},
		{"old alt screen", "\x1b[?47h", "\x1b[?47l"},
		{"autowrap off", "\x1b[?7l", "\x1b[?7h"},
		{"kitty keyboard", "\x1b[>1u\x1b[>3u\x1b[<u", "\x1b[<1u"},
		{"kitty popped too often", "\x1b[<5u", ""},
		{"kitty keyboard set, not pushed", "\x1b[=5u", "\x1b[=0u"},
		{"kitty keyboard set, then cleared", "\x1b[=5u\x1b[=0u", ""},
		{"kitty keyboard bits set", "\x1b[=1;2u", "\x1b[=0u"},
		{"kitty keyboard bits reset", "\x1b[=1;3u", ""},
		{"kitty keyboard set on a pushed level", "\x1b[>1u\x1b[=5u", "\x1b[<1u"},
		{"scroll region", "\x1b[2;10r", "\x1b7\x1b[r\x1b8"},
		{"scroll region reset", "\x1b[2;10r\x1b[r", ""},
		{"full reset", "\x1b[?1049h\x1b[8m\x1bc", ""},
		{"unfinished sequence", "\x1b[?10", ""},
		{"unknown modes", "\x1b[?12h\x1b[?9999h\x1b[7h", ""},
		{"insert mode, local echo", "\x1b[4;12l\x1b[4h", "\x1b[4l\x1b[12h"},
		{"insert mode ended", "\x1b[4h\x1b[4l", ""},
		{"printer controller", "\x1b[5isecret", "\x1b[4i"},
		{"printer controller ended", "\x1b[5ix\x1b[4i", ""},
		{"UTF-8 off", "\x1b%@", "\x1b%G"},
		{"UTF-8 back on", "\x1b%@\x1b%G", ""},
		{"aborted by CAN", "\x1b[?1049\x18h", "\r\n"},               // the h is text,
		{"inside a title", "\x1b]0;\x1b[?1049h\x07", "\x1b[?1049l"}, // ESC ends the string (as xterm)
		{"inside a DCS", "\x1bPq#0;2;0;0;0\x1b\\", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m termModes
			m.Write([]byte(tc.out))
			if got := string(m.reset()); got != tc.want {
				t.Errorf("reset after %q = %q, want %q", tc.out, got, tc.want)
			}
			if again := m.reset(); len(again) != 0 {
				t.Errorf("second reset = %q, want nothing", again)
			}
		})
	}
	// Sequences split across reads, one byte at a time.
	out := "\x1b[?1049h\x1b]0;t\x1b\\\x1b[?25l\x1b(0x\x1b[1m"
	var m termModes
	for i := 0; i < len(out); i++ {
		m.Write([]byte{out[i]})
	}
	if got, want := string(m.reset()), "\x1b[?1049l\x1b[?25h\x1b(B\x1b[m"; got != want {
		t.Errorf("byte by byte: reset %q, want %q", got, want)
	}
}

// An interactive agent that leaves the terminal on the alternate screen,
// its cursor hidden and its text concealed (as a full-screen program
// killed before it cleans up does) does not leave it so to the user: art
// switches those modes off after the session, before it prints anything.
// One that cleans up adds nothing to the output; one whose last line has
// no newline gets one, so that art's own line starts a line.
func TestInteractiveTerminalModesReset(t *testing.T) {
	requireBwrap(t)
	tests := []struct {
		name, script, wantEnd string
	}{
		{"left on", `printf '\033[?1049h\033[?25l\033[?1000h\033[8mSECRET'`, "SECRET\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[m"},
		{"killed", `printf '\033[?1049h\033[?2004h\033[>1uTUI'; kill -KILL $$`, "TUI\x1b[?1049l\x1b[?2004l\x1b[<1u"},
		{"cleaned up", `printf '\033[?1049h\033[1mx\033[m\033[?1049lDONE\n'`, "\x1b[?1049lDONE\r\n"},
		{"no final newline", `printf 'abc'`, "abc\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTestTerm(t)
			cfg := baseConfig(t, "sh", "-c", tc.script)
			if _, err := runInteractive(t, tt, cfg, nil); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !strings.HasSuffix(tt.output(), tc.wantEnd) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if out := tt.output(); !strings.HasSuffix(out, tc.wantEnd) {
				t.Errorf("output %q, want it to end with %q", out, tc.wantEnd)
			}
		})
	}
}
