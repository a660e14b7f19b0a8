package objects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Commit records one state of the whole home tree.
type Commit struct {
	Tree    ID       `json:"tree"`
	Parents []ID     `json:"parents"`
	Time    int64    `json:"time"` // ns since the Unix epoch
	Author  string   `json:"author"`
	Message string   `json:"message"`
	Session *Session `json:"session,omitempty"`
}

// Session describes how a commit was made: by a sandboxed run, a mount, or
// a push from the host.
type Session struct {
	Mode      string   `json:"mode"` // "push", "run", "mount"
	Argv      []string `json:"argv,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	// Status is "exited", "signaled", "timed out" or "interrupted"; a
	// push's is "" or "merged" (repo.PushMerged).
	Status   string `json:"status,omitempty"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Start    int64  `json:"start,omitempty"` // ns since the Unix epoch
	End      int64  `json:"end,omitempty"`
	Version  string `json:"version,omitempty"`
	TraceID  *ID    `json:"trace,omitempty"`
	// TraceLost says why a traced session's syscall log was not stored
	// (a full disk): the session was traced, and has no log.
	TraceLost string `json:"trace_lost,omitempty"`
	// Policy is the path policy in force, as the policy package prints it.
	Policy json.RawMessage `json:"policy,omitempty"`
}

const commitMagic = "artcommit\x01\n"

// Encode returns the canonical encoding of c: a magic line followed by
// compact JSON with fields in declaration order.
func (c *Commit) Encode() ([]byte, error) {
	if c.Parents == nil {
		c.Parents = []ID{}
	}
	// JSON cannot carry invalid UTF-8: encoding/json writes it as \ufffd
	// escapes, which decode to a different string, so the commit would
	// never re-encode to its own bytes and could not be read back.
	c.Author, c.Message = validUTF8(c.Author), validUTF8(c.Message)
	if s := c.Session; s != nil {
		s.Mode, s.Workspace, s.Status = validUTF8(s.Mode), validUTF8(s.Workspace), validUTF8(s.Status)
		s.Signal, s.Version, s.TraceLost = validUTF8(s.Signal), validUTF8(s.Version), validUTF8(s.TraceLost)
		for i, a := range s.Argv {
			if v := validUTF8(a); v != a {
				s.Argv = append([]string(nil), s.Argv...)
				s.Argv[i] = v
			}
		}
	}
	if c.Session != nil && c.Session.Policy != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, c.Session.Policy); err != nil {
			return nil, fmt.Errorf("encode commit policy: %w", err)
		}
		c.Session.Policy = buf.Bytes()
	}
	j, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode commit: %w", err)
	}
	return append([]byte(commitMagic), j...), nil
}

// EncodeCommit encodes c and returns the encoding with its id.
func EncodeCommit(c *Commit) ([]byte, ID, error) {
	b, err := c.Encode()
	if err != nil {
		return nil, Zero, err
	}
	return b, Hash(b), nil
}

// DecodeCommit parses a canonical commit encoding.
func DecodeCommit(data []byte) (*Commit, error) {
	if !bytes.HasPrefix(data, []byte(commitMagic)) {
		return nil, fmt.Errorf("decode commit: %w: bad magic", ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(data[len(commitMagic):]))
	dec.DisallowUnknownFields()
	var c Commit
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decode commit: %w: %v", ErrCorrupt, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode commit: %w: trailing data", ErrCorrupt)
	}
	if c.Tree.IsZero() {
		return nil, fmt.Errorf("decode commit: %w: no tree", ErrCorrupt)
	}
	again, err := c.Encode()
	if err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("decode commit: %w", ErrNotCanonical)
	}
	return &c, nil
}

// ErrNotFound is returned by loaders for ids they do not hold.
var ErrNotFound = errors.New("object not found")

// validUTF8 replaces invalid UTF-8 in s with U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
