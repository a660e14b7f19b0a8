package repo

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/artproject/art/objects"
)

// Resolve parses a revision: a full or unique-prefix (>= 4 hex digits)
// commit id, a branch name or HEAD, followed by any number of ~N, ~, ^ or
// ^N suffixes.
func (r *Repo) Resolve(rev string) (objects.ID, error) {
	if rev == "" {
		return objects.Zero, fmt.Errorf("%w: empty revision", ErrUnknownRev)
	}
	base, suffix := splitRev(rev)
	id, err := r.resolveBase(base)
	if err != nil {
		return objects.Zero, err
	}
	for suffix != "" {
		// done is the revision up to this suffix, for messages.
		done := rev[:len(rev)-len(suffix)]
		op := suffix[0]
		if op != '~' && op != '^' {
			return objects.Zero, fmt.Errorf("%w %q: unexpected %q after a ~ or ^ (use REV~N or REV^N)", ErrUnknownRev, rev, suffix)
		}
		suffix = suffix[1:]
		j := 0
		for j < len(suffix) && suffix[j] >= '0' && suffix[j] <= '9' {
			j++
		}
		n := 1
		if j > 0 {
			n, err = strconv.Atoi(suffix[:j])
			if err != nil || n > 1<<20 {
				return objects.Zero, fmt.Errorf("%w %q: bad number %q", ErrUnknownRev, rev, suffix[:j])
			}
		}
		suffix = suffix[j:]
		if op == '~' {
			for i := 0; i < n; i++ {
				c, err := r.LoadCommit(id)
				if err != nil {
					return objects.Zero, err
				}
				if len(c.Parents) == 0 {
					// Said as a count of the history: "commit X has 0
					// parent(s)" left the user to work out how far
					// back HEAD~N may go.
					if i == 0 {
						return objects.Zero, fmt.Errorf("%w %q: %s is the first commit of its history (see 'art log %s')", ErrUnknownRev, rev, done, done)
					}
					return objects.Zero, fmt.Errorf("%w %q: the history of %s has only %s before it (see 'art log %s')", ErrUnknownRev, rev, done, plural(i, "commit"), done)
				}
				id = c.Parents[0]
			}
		} else {
			if n == 0 {
				continue
			}
			if id, err = r.parent(id, n, rev, done); err != nil {
				return objects.Zero, err
			}
		}
	}
	return id, nil
}

func splitRev(rev string) (string, string) {
	i := strings.IndexAny(rev, "~^")
	if i < 0 {
		return rev, ""
	}
	return rev[:i], rev[i:]
}

// parent is the nth parent of commit id, which revision done names.
func (r *Repo) parent(id objects.ID, n int, rev, done string) (objects.ID, error) {
	c, err := r.LoadCommit(id)
	if err != nil {
		return objects.Zero, err
	}
	if n > len(c.Parents) {
		return objects.Zero, fmt.Errorf("%w %q: %s (%s) has %s, so no ^%d (see 'art show %s')", ErrUnknownRev, rev, done, id.Short(), plural(len(c.Parents), "parent"), n, done)
	}
	return c.Parents[n-1], nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (r *Repo) resolveBase(base string) (objects.ID, error) {
	if base == "HEAD" || base == "@" {
		h, err := r.Head()
		if err != nil {
			return objects.Zero, err
		}
		if h.Commit.IsZero() {
			return objects.Zero, fmt.Errorf("%w: HEAD (branch %s has no commits yet; make one with 'art push' or 'art run')", ErrNoCommits, h.Branch)
		}
		return h.Commit, nil
	}
	if id, err := r.BranchTip(base); err == nil {
		return id, nil
	} else if !errors.Is(err, ErrNoBranch) {
		return objects.Zero, err
	}
	if len(base) >= 4 && len(base) <= 64 && isHex(base) {
		return r.resolvePrefix(strings.ToLower(base))
	}
	if len(base) < 4 && isHex(base) {
		// Even when it matches one commit: shorter prefixes are not
		// looked up, and "not a branch, HEAD or commit id" about the
		// first digits of one hid why.
		return objects.Zero, fmt.Errorf("%w %q: not a branch or HEAD, and a commit id prefix needs at least 4 hex digits (see 'art log --all')", ErrUnknownRev, base)
	}
	return objects.Zero, fmt.Errorf("%w %q: not a branch, HEAD or commit id (see 'art branch' and 'art log --all')", ErrUnknownRev, base)
}

// resolvePrefix finds the commit whose id starts with the hex prefix,
// scanning only the matching key range.
func (r *Repo) resolvePrefix(prefix string) (objects.ID, error) {
	lo := prefix
	if len(lo)%2 == 1 {
		lo += "0"
	}
	loB, _ := hex.DecodeString(lo)
	rows, err := r.DB.Query(`SELECT id FROM commits WHERE id >= ? ORDER BY id LIMIT 11`, loB)
	if err != nil {
		return objects.Zero, fmt.Errorf("resolve %s: %w", prefix, err)
	}
	defer rows.Close()
	var found []objects.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return objects.Zero, err
		}
		id, err := objects.FromBytes(b)
		if err != nil {
			return objects.Zero, err
		}
		if !strings.HasPrefix(id.String(), prefix) {
			break
		}
		found = append(found, id)
	}
	if err := rows.Err(); err != nil {
		return objects.Zero, err
	}
	switch len(found) {
	case 0:
		return objects.Zero, fmt.Errorf("%w %q: no commit id starts with it (see 'art log --all')", ErrUnknownRev, prefix)
	case 1:
		return found[0], nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %q matches %d commits; use more digits:", ErrAmbiguousRev, prefix, len(found))
	for _, id := range found {
		line := ""
		if c, err := r.LoadCommit(id); err == nil {
			line, _, _ = strings.Cut(c.Message, "\n")
		}
		fmt.Fprintf(&b, "\n  %s %s", id.String()[:16], line)
	}
	return objects.Zero, &ambiguousError{msg: b.String()}
}

type ambiguousError struct{ msg string }

func (e *ambiguousError) Error() string { return e.msg }
func (e *ambiguousError) Unwrap() error { return ErrAmbiguousRev }
