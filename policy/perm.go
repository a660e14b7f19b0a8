package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Perm is what the agent may do with a path. The levels are ordered:
// None < View < Read < Write.
type Perm uint8

const (
	// None: the path does not exist for the agent (lookup fails with ENOENT,
	// it is absent from directory listings, it cannot be created).
	None Perm = iota
	// View: stat and directory listing work; opening content fails (EACCES).
	View
	// Read: content is readable; every change fails.
	Read
	// Write: full access.
	Write
)

var permNames = [...]string{None: "none", View: "view", Read: "read", Write: "write"}

// validPerms lists the permission words for error messages.
const validPerms = "none, view, read, write"

// String returns the permission word ("none", "view", "read", "write").
func (p Perm) String() string {
	if int(p) < len(permNames) {
		return permNames[p]
	}
	return "Perm(" + strconv.Itoa(int(p)) + ")"
}

func (p Perm) valid() bool { return p <= Write }

// ParsePerm parses a permission word: none, view, read or write. Case and
// surrounding spaces are ignored.
func ParsePerm(s string) (Perm, error) {
	w := strings.ToLower(strings.TrimSpace(s))
	for i, n := range permNames {
		if w == n {
			return Perm(i), nil
		}
	}
	if w == "" {
		return None, fmt.Errorf("empty permission; valid permissions: %s", validPerms)
	}
	return None, fmt.Errorf("unknown permission %q; valid permissions: %s", s, validPerms)
}

// MarshalText implements encoding.TextMarshaler (JSON: "none", "view", ...).
func (p Perm) MarshalText() ([]byte, error) {
	if !p.valid() {
		return nil, fmt.Errorf("invalid permission %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler using ParsePerm.
func (p *Perm) UnmarshalText(b []byte) error {
	v, err := ParsePerm(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
