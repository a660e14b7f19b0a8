package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ParseFile parses a policy file such as the host's .art/config/policy.json:
//
//	{"default": "write", "rules": [{"pattern": "secrets/", "permission": "none"}]}
//
// or a bare array of rules. A rule object has "pattern" and "permission", and
// optionally "ignore_case" (bool) and "source" (string; otherwise name is used).
// def is nil when the file sets no default. Every pattern is validated. Errors
// start with name and give the line and column.
func ParseFile(data []byte, name string) (def *Perm, rules []Rule, err error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		// A UTF-8 byte order mark, as some editors write: read it as white
		// space so that offsets stay right.
		data = append([]byte("   "), data[3:]...)
	}
	p := &fileParser{data: data, name: name}
	def, rules, err = p.parse()
	if err != nil {
		return nil, nil, err
	}
	return def, rules, nil
}

type fileParser struct {
	data []byte
	name string
	dec  *json.Decoder
}

const fileFormat = `{"default": "write", "rules": [{"pattern": "secrets/", "permission": "none"}]} or a bare array of rules`

// errorf formats an error at a byte offset of the file.
func (p *fileParser) errorf(off int64, format string, a ...any) error {
	line, col := position(p.data, off)
	return fmt.Errorf("%s: line %d, column %d: %s", p.name, line, col, fmt.Sprintf(format, a...))
}

// position converts a byte offset to a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// start returns the offset of the next value (skipping white space, ',' and ':').
func (p *fileParser) start() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// jsonErr turns a decoding error into one with a position.
func (p *fileParser) jsonErr(err error, off int64) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return p.errorf(se.Offset, "invalid JSON: %v", se)
	case errors.As(err, &te):
		return p.errorf(off, "expected %s, found a JSON %s", te.Type, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return p.errorf(int64(len(p.data)), "invalid JSON: unexpected end of file")
	}
	return p.errorf(off, "invalid JSON: %v", err)
}

func (p *fileParser) parse() (*Perm, []Rule, error) {
	trimmed := bytes.TrimSpace(p.data)
	if len(trimmed) == 0 {
		return nil, nil, fmt.Errorf("%s: the file is empty; write %s (or remove the file)", p.name, fileFormat)
	}
	p.dec = json.NewDecoder(bytes.NewReader(p.data))
	p.dec.UseNumber()
	off := p.start()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, nil, p.jsonErr(err, off)
	}
	var def *Perm
	var rules []Rule
	switch tok {
	case json.Delim('['):
		if rules, err = p.rules(); err != nil {
			return nil, nil, err
		}
	case json.Delim('{'):
		seenRules := false
		for p.dec.More() {
			off := p.start()
			t, err := p.dec.Token()
			if err != nil {
				return nil, nil, p.jsonErr(err, off)
			}
			key, _ := t.(string)
			switch key {
			case "default":
				off := p.start()
				var v any
				if err := p.dec.Decode(&v); err != nil {
					return nil, nil, p.jsonErr(err, off)
				}
				if v == nil {
					continue
				}
				s, ok := v.(string)
				if !ok {
					return nil, nil, p.errorf(off, "\"default\" must be a string, one of %s", validPerms)
				}
				d, err := ParsePerm(s)
				if err != nil {
					return nil, nil, p.errorf(off, "\"default\": %v", err)
				}
				def = &d
			case "rules":
				off := p.start()
				t, err := p.dec.Token()
				if err != nil {
					return nil, nil, p.jsonErr(err, off)
				}
				if seenRules {
					return nil, nil, p.errorf(off, "\"rules\" appears twice; merge the two lists")
				}
				seenRules = true
				if t == nil {
					continue
				}
				if t != json.Delim('[') {
					return nil, nil, p.errorf(off, "\"rules\" must be an array of {\"pattern\": ..., \"permission\": ...} objects")
				}
				if rules, err = p.rules(); err != nil {
					return nil, nil, err
				}
			default:
				return nil, nil, p.errorf(off, "unknown field %q; the file has \"default\" and \"rules\": %s", key, fileFormat)
			}
		}
		if _, err := p.dec.Token(); err != nil { // '}'
			return nil, nil, p.jsonErr(err, p.start())
		}
	default:
		return nil, nil, p.errorf(off, "expected %s", fileFormat)
	}
	off = p.start()
	if _, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return nil, nil, p.jsonErr(err, off)
		}
		return nil, nil, p.errorf(off, "unexpected data after the policy; the file must hold a single JSON value")
	}
	return def, rules, nil
}

type fileRule struct {
	Pattern    *string `json:"pattern"`
	Permission *string `json:"permission"`
	IgnoreCase bool    `json:"ignore_case"`
	Source     *string `json:"source"`
}

// rules parses the elements of a rules array, after its '['.
func (p *fileParser) rules() ([]Rule, error) {
	rules := []Rule{}
	for n := 1; p.dec.More(); n++ {
		off := p.start()
		if off < int64(len(p.data)) && p.data[off] != '{' {
			var v any
			if err := p.dec.Decode(&v); err != nil {
				return nil, p.jsonErr(err, off)
			}
			return nil, p.errorf(off, "rule %d: expected an object {\"pattern\": ..., \"permission\": ...}", n)
		}
		raw := json.RawMessage{}
		if err := p.dec.Decode(&raw); err != nil {
			return nil, p.jsonErr(err, off)
		}
		var fr fileRule
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&fr); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, p.errorf(off, "rule %d: %q must be a JSON %s, not a %s", n, te.Field, te.Type, te.Value)
			}
			msg := err.Error()
			if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
				return nil, p.errorf(off, "rule %d: unknown field %s; a rule has \"pattern\", \"permission\", and optionally \"ignore_case\" and \"source\"", n, f)
			}
			return nil, p.errorf(off, "rule %d: %v", n, err)
		}
		if fr.Pattern == nil {
			return nil, p.errorf(off, "rule %d: missing \"pattern\"", n)
		}
		if fr.Permission == nil {
			return nil, p.errorf(off, "rule %d (%q): missing \"permission\" (one of %s)", n, *fr.Pattern, validPerms)
		}
		perm, err := ParsePerm(*fr.Permission)
		if err != nil {
			return nil, p.errorf(off, "rule %d (%q): %v", n, *fr.Pattern, err)
		}
		if _, err := compilePattern(*fr.Pattern, fr.IgnoreCase); err != nil {
			var pe *PatternError
			if errors.As(err, &pe) {
				return nil, p.errorf(off, "rule %d: invalid pattern %q: %s", n, pe.Pattern, pe.Msg)
			}
			return nil, p.errorf(off, "rule %d: %v", n, err)
		}
		r := Rule{Pattern: *fr.Pattern, Perm: perm, IgnoreCase: fr.IgnoreCase, Source: p.name}
		// An empty "source" names nothing: the rule comes from this file
		// (and the canonical form, which omits empty sources, re-parses
		// to the same rule).
		if fr.Source != nil && *fr.Source != "" {
			r.Source = *fr.Source
		}
		rules = append(rules, r)
	}
	if _, err := p.dec.Token(); err != nil { // ']'
		return nil, p.jsonErr(err, p.start())
	}
	return rules, nil
}

// ParseAllow parses a --allow value "PATTERN=PERM", e.g. "secrets/=none" or
// "ws/build/**=write". The permission follows the last '='.
func ParseAllow(s string) (Rule, error) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return Rule{}, fmt.Errorf("--allow %q: missing \"=PERMISSION\"; write --allow 'PATTERN=PERMISSION', e.g. --allow 'secrets/=none' (permissions: %s)", s, validPerms)
	}
	pat, word := s[:i], s[i+1:]
	perm, err := ParsePerm(word)
	if err != nil {
		return Rule{}, fmt.Errorf("--allow %q: %v", s, err)
	}
	if _, err := compilePattern(pat, false); err != nil {
		return Rule{}, fmt.Errorf("--allow %q: %v", s, err)
	}
	return Rule{Pattern: pat, Perm: perm, Source: "--allow"}, nil
}

// Preset names.
const (
	PresetFullAccess  = "full-access"
	PresetDevelopment = "development"
	PresetAgentSafe   = "agent-safe"
	PresetReadOnly    = "read-only"
)

// PresetNames returns the preset names, the default (full-access) first.
func PresetNames() []string {
	return []string{PresetFullAccess, PresetDevelopment, PresetAgentSafe, PresetReadOnly}
}

// secretPatterns are hidden (None) by development and agent-safe.
var secretPatterns = []string{
	".env", ".env.*", "*.pem", "*.key",
	"id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*",
	".ssh/", ".aws/", ".gnupg/", ".netrc", "credentials*", "secrets/",
}

// autorunPatterns are read-only in agent-safe: files that make the user's
// machine run code once exported (git hooks and config, direnv, editor
// settings, shell startup files, MCP and agent configuration).
var autorunPatterns = []string{
	".git/hooks/", ".git/config", ".git/modules/**/hooks/", ".git/modules/**/config",
	// These send git elsewhere for its config and hooks, or add config.
	".git/commondir", ".git/config.worktree", ".git/modules/**/commondir", ".git/modules/**/config.worktree",
	".gitmodules", ".gitconfig", ".envrc", ".vscode/", ".idea/", ".mcp.json",
	".claude/settings.json", ".claude/settings.local.json",
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
	".kshrc", ".cshrc", ".tcshrc", ".config/fish/",
}

func presetRules(source string, perm Perm, patterns []string) []Rule {
	rules := make([]Rule, len(patterns))
	for i, pat := range patterns {
		rules[i] = Rule{Pattern: pat, Perm: perm, IgnoreCase: true, Source: source}
	}
	return rules
}

// Preset returns the rules of a named preset, and the default it sets (nil:
// it keeps the default of earlier sources). See the package documentation.
func Preset(name string) (def *Perm, rules []Rule, err error) {
	src := "preset " + name
	switch name {
	case PresetFullAccess:
		return nil, nil, nil
	case PresetDevelopment:
		return nil, presetRules(src, None, secretPatterns), nil
	case PresetAgentSafe:
		rules = presetRules(src, None, secretPatterns)
		return nil, append(rules, presetRules(src, Read, autorunPatterns)...), nil
	case PresetReadOnly:
		d := Read
		return &d, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown preset %q; valid presets: %s", name, strings.Join(PresetNames(), ", "))
}

// Build combines the standard sources in increasing priority: the host's
// policy file (file is its content, nil when there is none; fileName names it
// in errors and as the rules' source), the preset ("" means full-access), then
// each --allow value. The default is Write unless the file or the preset sets
// one (the preset's wins).
func Build(file []byte, fileName, preset string, allows []string) (*Policy, error) {
	def := Write
	var sources [][]Rule
	if file != nil {
		d, rules, err := ParseFile(file, fileName)
		if err != nil {
			return nil, err
		}
		if d != nil {
			def = *d
		}
		sources = append(sources, rules)
	}
	if preset == "" {
		preset = PresetFullAccess
	}
	d, rules, err := Preset(preset)
	if err != nil {
		return nil, err
	}
	if d != nil {
		def = *d
	}
	sources = append(sources, rules)
	var allowed []Rule
	for _, a := range allows {
		r, err := ParseAllow(a)
		if err != nil {
			return nil, err
		}
		allowed = append(allowed, r)
	}
	sources = append(sources, allowed)
	return New(def, sources...)
}
