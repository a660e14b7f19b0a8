package repo

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QuotePath makes a path (or link target) safe to print on a terminal, as
// git's core.quotePath does for the bytes that matter: a name holding a
// control character (C0 or C1), DEL, a double quote, a backslash or
// invalid UTF-8 is printed in double quotes with C escapes (\n, \t,
// \033, ...), so an agent's file name can neither forge output lines nor
// send escape sequences to the user's terminal. So are names holding a
// Unicode format character (Cf: the bidirectional overrides, which made
// "invoice\u202efdp.exe" show as invoiceexe.pdf, zero-width joiners).
// Other names, UTF-8 included, are printed as they are.
func QuotePath(p string) string {
	if !needsQuote(p) {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		c := p[i]
		switch {
		case r == utf8.RuneError && size <= 1:
			octal(&b, c)
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			octal(&b, c)
		case r >= 0x80 && r <= 0x9f, unicode.Is(unicode.Cf, r): // C1 controls (0x9b is CSI to some terminals), bidi and other format characters
			for j := 0; j < size; j++ {
				octal(&b, p[i+j])
			}
		default:
			b.WriteString(p[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// EscapeControls escapes, as \ooo, the bytes of a message that could act
// on a terminal (C0 controls but newline and tab, DEL, C1 controls,
// invalid UTF-8), leaving the rest as it is: error messages and warnings
// name paths an agent chose.
func EscapeControls(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f || r == utf8.RuneError && size == 1 || unicode.Is(unicode.Cf, r) {
			for j := 0; j < size; j++ {
				octal(&b, s[i+j])
			}
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// ShellArg quotes s as one word of a shell command that advice prints
// for the user to run: as it is when made of characters no shell treats
// specially, else in single quotes, inside which a shell expands nothing.
// A word with bytes a terminal must not see as they are (control
// characters, invalid UTF-8: see needsQuote) is printed in $'...' with
// octal escapes, which bash, zsh and ksh read back as those bytes.
// QuotePath's double quotes were used for those, and for '"' and '\':
// a shell expands $(...) inside them, so a path holding '"' and "$(cmd)"
// ran cmd when the advice was pasted.
func ShellArg(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./:@%+=,", c) >= 0
	}
	if plain {
		return s
	}
	if !terminalUnsafe(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			octal(&b, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// terminalUnsafe reports whether p holds what needsQuote escapes for the
// terminal's sake, '"' and '\\' aside.
func terminalUnsafe(p string) bool {
	for _, r := range p {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r == utf8.RuneError || unicode.Is(unicode.Cf, r) {
			return true
		}
	}
	return false
}

func needsQuote(p string) bool {
	return strings.ContainsAny(p, "\"\\") || terminalUnsafe(p)
}

func octal(b *strings.Builder, c byte) {
	b.WriteByte('\\')
	s := strconv.FormatUint(uint64(c), 8)
	b.WriteString(strings.Repeat("0", 3-len(s)) + s)
}
