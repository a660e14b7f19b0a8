package sandbox

import (
	"bytes"
	"fmt"
	"sort"
)

// termModes follows the modes that an interactive agent's output switches
// on in the caller's terminal emulator (the pty passes its escape sequences
// through), so that those it leaves on can be switched off when the
// session ends. A full-screen program killed before it cleans up (Ctrl-C to
// art: the sandbox gets SIGKILL after StopGrace; vim ignores SIGINT) left
// the user's shell on the alternate screen, with the cursor hidden, mouse
// reports typed into its command line, bracketed paste and the kitty
// keyboard protocol on (Ctrl-C no longer a ^C), and an agent that printed
// "\e[8m" (concealed) or "\e(0" (line drawing) made art's own "session
// recorded" line, and the shell's prompt after it, unreadable.
//
// Only what the agent changed is reset, nothing else is written: a session
// that leaves the terminal as it found it adds no byte to the output (and
// leaving the alternate screen that is not on would restore a cursor
// position saved by someone else). The window title, colours of the
// palette and the like are left alone: they do not hide text.
type termModes struct {
	state   int
	seq     []byte       // parameter and intermediate bytes of a CSI sequence
	dec     map[int]bool // tracked DEC private modes: last set (h) or reset (l)
	ansi    map[int]bool // tracked ANSI modes, the same
	printer bool         // printer controller mode (CSI 5 i): output goes to the printer, not the screen
	latin   bool         // ESC % @: UTF-8 off (the Linux console)
	kitty   int          // kitty keyboard protocol levels pushed and not popped
	// kittySet: kitty keyboard flags set without a push (CSI = flags u,
	// which the protocol allows besides push and pop), on the level the
	// terminal had before the session.
	kittySet bool
	keypad   bool // application keypad (ESC =)
	modKeys  bool // xterm modifyOtherKeys (CSI > 4 ; n m)
	sgr      bool // graphic rendition other than the default
	g0       bool // G0 character set other than ASCII (ESC ( 0)
	shifted  bool // G1 invoked (SO)
	margins  bool // scrolling region set (DECSTBM)
	// midLine: the last text written on the normal screen did not end
	// its line, so art's own line would have followed it there
	// ("abcart: session recorded ..."); reset then ends the line. Text on
	// the alternate screen (or sent to the printer) leaves it as it was:
	// leaving that screen puts the cursor back.
	midLine bool
}

const (
	tmGround = iota
	tmEsc
	tmEscSkip // ESC and an intermediate: skip to the final byte
	tmEscG0   // ESC (: G0's character set follows
	tmEscPct  // ESC %: the coding system follows
	tmCSI
	tmString    // OSC, DCS, APC, PM, SOS: skipped up to BEL or ST
	tmStringEsc // ESC inside a string
)

// decDefaults are the DEC private modes followed, with their power-on value.
var decDefaults = map[int]bool{
	1:    false, // application cursor keys
	5:    false, // reverse video
	7:    true,  // autowrap
	9:    false, // X10 mouse
	25:   true,  // cursor visible
	47:   false, // alternate screen
	66:   false, // application keypad
	1000: false, // mouse reports
	1001: false,
	1002: false,
	1003: false,
	1004: false, // focus reports
	1005: false,
	1006: false,
	1015: false,
	1016: false,
	1047: false, // alternate screen
	1049: false, // alternate screen, cursor saved
	2004: false, // bracketed paste
	2026: false, // synchronized output: the terminal stops drawing
	2048: false, // in-band resize reports
}

// ansiDefaults are the ANSI modes followed, with their power-on value.
var ansiDefaults = map[int]bool{
	4:  false, // insert mode
	12: true,  // send/receive: reset, the terminal echoes keys itself
	20: false, // newline mode
}

// Write follows p; it never fails.
func (m *termModes) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		b := p[i]
		if m.state == tmGround {
			// Fast path: plain text up to the next control byte that matters.
			j := bytes.IndexAny(p[i:], "\x1b\x0e\x0f")
			if j < 0 {
				m.text(p[i:])
				break
			}
			m.text(p[i : i+j])
			i += j
			b = p[i]
		}
		m.step(b)
	}
	return len(p), nil
}

// text follows a run of plain text on the screen.
func (m *termModes) text(run []byte) {
	if len(run) == 0 || m.printer || m.dec[1049] || m.dec[1047] || m.dec[47] {
		return
	}
	last := run[len(run)-1]
	m.midLine = last != '\n' && last != '\r'
}

func (m *termModes) step(b byte) {
	if b == 0x18 || b == 0x1a { // CAN, SUB: abort any sequence
		m.state = tmGround
		return
	}
	switch m.state {
	case tmGround:
		switch b {
		case 0x1b:
			m.state = tmEsc
		case 0x0e:
			m.shifted = true
		case 0x0f:
			m.shifted = false
		}
	case tmEsc:
		m.state = tmGround
		switch {
		case b == '[':
			m.state, m.seq = tmCSI, m.seq[:0]
		case b == ']' || b == 'P' || b == '_' || b == '^' || b == 'X':
			m.state = tmString
		case b == '(':
			m.state = tmEscG0
		case b == '%':
			m.state = tmEscPct
		case b >= 0x20 && b <= 0x2f:
			m.state = tmEscSkip
		case b == '=':
			m.keypad = true
		case b == '>':
			m.keypad = false
		case b == 'c': // RIS: the terminal is reset to its defaults
			*m = termModes{seq: m.seq[:0]}
		case b == 0x1b:
			m.state = tmEsc
		}
	case tmEscSkip:
		if b == 0x1b {
			m.state = tmEsc
		} else if b >= 0x30 {
			m.state = tmGround
		}
	case tmEscPct:
		m.state = tmGround
		switch b {
		case 0x1b:
			m.state = tmEsc
		case '@':
			m.latin = true
		case 'G':
			m.latin = false
		}
	case tmEscG0:
		m.state = tmGround
		if b == 0x1b {
			m.state = tmEsc
		} else {
			m.g0 = b != 'B'
		}
	case tmCSI:
		switch {
		case b >= 0x20 && b <= 0x3f:
			if len(m.seq) < 64 {
				m.seq = append(m.seq, b)
			}
		case b >= 0x40 && b <= 0x7e:
			m.state = tmGround
			if len(m.seq) < 64 {
				m.csi(m.seq, b)
			}
		case b == 0x1b:
			m.state = tmEsc
		}
	case tmString:
		if b == 0x07 {
			m.state = tmGround
		} else if b == 0x1b {
			m.state = tmStringEsc
		}
	case tmStringEsc:
		if b == '\\' {
			m.state = tmGround
		} else {
			m.state = tmEsc
			m.step(b)
		}
	}
}

// csi handles one control sequence: seq holds its parameter and
// intermediate bytes, final its final byte.
func (m *termModes) csi(seq []byte, final byte) {
	var private byte
	if len(seq) > 0 && seq[0] >= '<' && seq[0] <= '?' {
		private, seq = seq[0], seq[1:]
	}
	for _, c := range seq {
		if c < '0' || c > ';' { // an intermediate byte: another function
			return
		}
	}
	params := bytes.Split(seq, []byte(";"))
	num := func(i, def int) int {
		if i >= len(params) || len(params[i]) == 0 {
			return def
		}
		n := 0
		for _, c := range params[i] {
			if c < '0' || c > '9' || n > 1<<20 {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	switch {
	case private == '?' && (final == 'h' || final == 'l'):
		for i := range params {
			n := num(i, -1)
			if _, ok := decDefaults[n]; ok {
				if m.dec == nil {
					m.dec = map[int]bool{}
				}
				m.dec[n] = final == 'h'
			}
		}
	case private == 0 && (final == 'h' || final == 'l'):
		for i := range params {
			n := num(i, -1)
			if _, ok := ansiDefaults[n]; ok {
				if m.ansi == nil {
					m.ansi = map[int]bool{}
				}
				m.ansi[n] = final == 'h'
			}
		}
	case private == 0 && final == 'i':
		switch num(0, 0) {
		case 5:
			m.printer = true
		case 4:
			m.printer = false
		}
	case private == 0 && final == 'm':
		m.sgr = false
		for i := range params {
			if num(i, 0) != 0 {
				m.sgr = true
			}
		}
	case private == '>' && final == 'm':
		if k := num(0, -1); k == 4 || k == -1 && len(seq) == 0 {
			m.modKeys = num(1, 0) != 0
		}
	case private == '>' && final == 'u':
		m.kitty++
	case private == '=' && final == 'u':
		if m.kitty > 0 {
			break // the pushed level, popped on reset
		}
		switch flags := num(0, 0); num(1, 1) {
		case 1: // set to flags
			m.kittySet = flags != 0
		case 2: // set the bits of flags
			m.kittySet = m.kittySet || flags != 0
		}
	case private == '<' && final == 'u':
		if m.kitty -= num(0, 1); m.kitty < 0 {
			m.kitty = 0
		}
	case private == 0 && final == 'r':
		m.margins = num(0, 1) != 1 || len(params) > 1 && num(1, 0) != 0
	}
}

// switchOff writes, for each mode of order that set holds away from its
// default, the sequence that puts it back (private: "?" for DEC private
// modes, "" for ANSI ones), and forgets it.
func switchOff(b *bytes.Buffer, set, defaults map[int]bool, private string, order []int) {
	for _, n := range order {
		if on, ok := set[n]; ok && on != defaults[n] {
			c := byte('l')
			if defaults[n] {
				c = 'h'
			}
			fmt.Fprintf(b, "\x1b[%s%d%c", private, n, c)
			delete(set, n)
		}
	}
}

// sortedModes lists the modes of set in order.
func sortedModes(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// reset returns what switches off the modes the output left on and ends
// a line it left unfinished; nothing when it left none.
func (m *termModes) reset() []byte {
	var b bytes.Buffer
	// Output reaches the screen again first, and drawing resumes, then
	// back to the normal screen (1049 restores the cursor saved on
	// entry), then the rest there.
	if m.printer {
		b.WriteString("\x1b[4i")
	}
	if m.latin {
		b.WriteString("\x1b%G")
	}
	switchOff(&b, m.dec, decDefaults, "?", []int{2026, 1049, 1047, 47})
	if m.margins {
		b.WriteString("\x1b7\x1b[r\x1b8") // DECSTBM homes the cursor
	}
	switchOff(&b, m.dec, decDefaults, "?", sortedModes(m.dec))
	switchOff(&b, m.ansi, ansiDefaults, "", sortedModes(m.ansi))
	if m.keypad {
		b.WriteString("\x1b>")
	}
	if m.kitty > 0 {
		fmt.Fprintf(&b, "\x1b[<%du", m.kitty)
	}
	if m.kittySet {
		b.WriteString("\x1b[=0u")
	}
	if m.modKeys {
		b.WriteString("\x1b[>4m")
	}
	if m.g0 {
		b.WriteString("\x1b(B")
	}
	if m.shifted {
		b.WriteString("\x0f")
	}
	if m.sgr {
		b.WriteString("\x1b[m")
	}
	if m.midLine {
		b.WriteString("\r\n")
	}
	*m = termModes{seq: m.seq[:0]}
	return b.Bytes()
}
