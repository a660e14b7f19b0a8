package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/artproject/art/internal/owner"
)

// LoadBinds reads a binds.json file in ART's format: a JSON array of
// objects {"host": "...", "guest": "...", "readonly": true}, where readonly
// defaults to true. A relative host path is relative to workspace (the host
// directory of the workspace). A missing file means no binds. Errors name
// the file, the entry (index and value) and what to do.
//
// Callers must read it from the host (for art, .art/config/binds.json),
// never from anything the agent can write.
func LoadBinds(path string, workspace string) ([]Bind, error) {
	data, err := ReadConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("binds file: %w", err)
	}
	if data == nil {
		return nil, nil
	}
	binds, err := ParseBinds(data, workspace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return binds, nil
}

// ParseBinds parses and checks the contents of a binds.json file; see
// LoadBinds.
func ParseBinds(data []byte, workspace string) ([]Bind, error) {
	var entries []json.RawMessage
	if err := strictDecode(data, &entries); err != nil {
		return nil, fmt.Errorf("not a valid binds file: %s; it must be a JSON array like [{\"host\": \"data\", \"guest\": \"/data\", \"readonly\": true}]", describeJSONError(data, err))
	}
	var out []Bind
	for i, raw := range entries {
		b, err := parseBind(raw, workspace)
		if err != nil {
			return nil, fmt.Errorf("entry %d %s: %w", i, compact(raw), err)
		}
		out = append(out, b)
	}
	return out, nil
}

func parseBind(raw json.RawMessage, workspace string) (Bind, error) {
	var e struct {
		Host     *string `json:"host"`
		Guest    *string `json:"guest"`
		ReadOnly *bool   `json:"readonly"`
	}
	if err := strictDecode(raw, &e); err != nil {
		return Bind{}, fmt.Errorf("%s; an entry is an object with \"host\", \"guest\" and optionally \"readonly\"", describeJSONError(raw, err))
	}
	if e.Host == nil || *e.Host == "" {
		return Bind{}, errors.New(`"host" is missing: give the host path to bind (absolute, or relative to the workspace)`)
	}
	host := *e.Host
	if !filepath.IsAbs(host) {
		if workspace == "" {
			return Bind{}, fmt.Errorf("host path %q is relative and no workspace is known: use an absolute path", host)
		}
		ws, err := filepath.Abs(workspace)
		if err != nil {
			return Bind{}, err
		}
		host = filepath.Join(ws, host)
	}
	host = filepath.Clean(host)
	if _, err := os.Stat(host); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Bind{}, fmt.Errorf("host path %s does not exist: create it or fix the path", host)
		}
		return Bind{}, fmt.Errorf("host path %s: %w", host, err)
	}
	if workspace != "" {
		real, err := resolveBindHost(host, workspace)
		if err != nil {
			return Bind{}, err
		}
		host = real
	}
	guest := ""
	if e.Guest != nil {
		guest = *e.Guest
	}
	g, err := checkGuest(guest)
	if err != nil {
		return Bind{}, err
	}
	ro := true
	if e.ReadOnly != nil {
		ro = *e.ReadOnly
	}
	return Bind{Host: host, Guest: g, ReadOnly: ro}, nil
}

// resolveBindHost resolves a bind's host path, refusing what the agent's
// work can steer: a symbolic link met inside the workspace, where a pull
// writes whatever the agent left (however the path is written: relative,
// absolute, through ../, or through a link of the user's that leads into
// the workspace), and any path that is, holds or lies in the workspace's
// .art, where art's config lives (an agent able to write binds.json would
// choose its next binds).
func resolveBindHost(host, workspace string) (string, error) {
	real, err := ResolveAvoidingWorkspaceLinks(host, workspace, false)
	if err != nil {
		return "", fmt.Errorf("host path %s: %w", host, err)
	}
	wsReal, err := realDir(workspace)
	if err != nil {
		return "", err
	}
	art := filepath.Join(wsReal, ".art")
	if real == art || strings.HasPrefix(real, art+"/") {
		return "", fmt.Errorf("host path %s is art's own %s, which the agent must never see", host, art)
	}
	return real, nil
}

// realDir is the absolute real path of the workspace directory. Given
// relative ("." for art run without -m), EvalSymlinks kept it relative,
// no absolute path lay "inside" it, and every link in it went through.
func realDir(workspace string) (string, error) {
	abs, err := filepath.Abs(workspace)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", workspace, err)
	}
	return abs, nil
}

// ResolveAvoidingWorkspaceLinks resolves path to a real path, following
// symbolic links one component at a time, and refuses any link that lies
// inside the workspace (an agent's pulled work can put one there); links
// elsewhere are the user's own. With missingLast, the last component need
// not exist (a file about to be created).
func ResolveAvoidingWorkspaceLinks(path, workspace string, missingLast bool) (string, error) {
	return ResolveAvoidingAgentLinks(path, workspace, nil, missingLast)
}

// ResolveAvoidingAgentLinks is ResolveAvoidingWorkspaceLinks that also
// refuses links inside writable, the host directories the sandbox may
// write (read-write binds): an agent's link there, named like the user's
// --trace-log, had the next art run as root truncate and overwrite the
// root-only file it pointed at. A writable directory that does not exist
// is skipped.
func ResolveAvoidingAgentLinks(path, workspace string, writable []string, missingLast bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	wsReal, err := realDir(workspace)
	if err != nil {
		return "", err
	}
	inWorkspace := func(p string) bool { return p == wsReal || strings.HasPrefix(p, wsReal+"/") }
	var rw []string
	for _, d := range writable {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			rw = append(rw, filepath.Clean(r))
		}
	}
	inWritable := func(p string) string {
		for _, d := range rw {
			if p == d || strings.HasPrefix(p, d+"/") || d == "/" {
				return d
			}
		}
		return ""
	}
	todo := strings.Split(strings.TrimPrefix(filepath.Clean(abs), "/"), "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) && missingLast && len(todo) == 0 {
			return next, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if inWorkspace(cur) {
			return "", fmt.Errorf("%s is a symbolic link inside the workspace (an agent's work can put one there); use the real path", next)
		}
		if d := inWritable(cur); d != "" {
			return "", fmt.Errorf("%s is a symbolic link inside %s, which the sandbox may write (a read-write bind: an agent can put one there); use the real path", next, d)
		}
		if uid, ok := foreignLinkOwner(fi); ok {
			return "", fmt.Errorf("%s is a symbolic link of uid %d, another user, who can have it lead anywhere (root's --trace-log through one in /tmp truncated and overwrote the root-only file it named; art resolves links itself, so fs.protected_symlinks does not stop it); use the real path", next, uid)
		}
		if strings.HasPrefix(next, "/proc/") {
			// A magic link (/dev/stderr is /proc/self/fd/2): its target
			// is no path; the kernel resolves it on open.
			return filepath.Join(append([]string{next}, todo...)...), nil
		}
		if links++; links > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", path)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), todo...)
	}
	return cur, nil
}

// foreignLinkOwner reports the owner of link fi when art may not follow
// it (owner.LinkTrusted): what such a link leads to is theirs to choose,
// at any moment.
func foreignLinkOwner(fi fs.FileInfo) (uint32, bool) {
	uid, ok := owner.Of(fi)
	if !ok || owner.LinkTrusted(uid) {
		return 0, false
	}
	return uid, true
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// describeJSONError adds a line:column to syntax and type errors.
func describeJSONError(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.EOF):
		return "the file is empty"
	}
	if off < 0 {
		return err.Error()
	}
	line, col := 1, 1
	for _, c := range data[:min(int(off), len(data))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%v (line %d, column %d)", err, line, col)
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	s := b.String()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
