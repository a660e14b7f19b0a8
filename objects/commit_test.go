package objects

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleCommit() *Commit {
	trace := testID("trace")
	return &Commit{
		Tree:    testID("tree"),
		Parents: []ID{testID("p1"), testID("p2")},
		Time:    1700000000123456789,
		Author:  "agent@host",
		Message: "fix <html> & \"quotes\"\nsecond line\u2028",
		Session: &Session{
			Mode: "run", Argv: []string{"sh", "-c", "echo hi"}, Workspace: "ws",
			Status: "exited", ExitCode: 3, Start: 10, End: 20, Version: "0.1.0",
			TraceID: &trace, Policy: json.RawMessage(`{"rules":[{"path":"/x","perm":"read"}]}`),
		},
	}
}

func TestCommitRoundTrip(t *testing.T) {
	for _, c := range []*Commit{
		sampleCommit(),
		{Tree: testID("root"), Time: 1, Message: "first"},
		{Tree: testID("root"), Parents: []ID{testID("p")}, Session: &Session{Mode: "push"}},
	} {
		b, id, err := EncodeCommit(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte(commitMagic)) || id != Hash(b) {
			t.Fatal("bad magic or id")
		}
		got, err := DecodeCommit(b)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, c)
		}
		again, err := got.Encode()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	}
}

func TestCommitPolicyIsCompacted(t *testing.T) {
	c := &Commit{Tree: testID("t"), Session: &Session{Mode: "run", Policy: json.RawMessage("{ \"a\" :\n [1, 2] }")}}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"policy":{"a":[1,2]}`)) {
		t.Fatalf("policy not compacted: %s", b)
	}
	if _, err := DecodeCommit(b); err != nil {
		t.Fatal(err)
	}
	bad := &Commit{Tree: testID("t"), Session: &Session{Policy: json.RawMessage("{not json")}}
	if _, err := bad.Encode(); err == nil {
		t.Fatal("invalid policy JSON was encoded")
	}
}

// Regression: strings with invalid UTF-8 (a commit message, an argv entry,
// a workspace directory name) used to be encoded as \ufffd escapes that
// decode to different strings, so the commit could never be read back and
// its branch became unreadable.
func TestCommitInvalidUTF8IsReadable(t *testing.T) {
	c := &Commit{Tree: testID("t"), Author: "u\xff@h", Message: "bad \xff\xfe msg",
		Session: &Session{Mode: "run", Argv: []string{"ok", "a\xffb"}, Workspace: "ws\xc0"}}
	argv := c.Session.Argv
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommit(b)
	if err != nil {
		t.Fatalf("a commit with invalid UTF-8 cannot be decoded: %v", err)
	}
	if !strings.HasPrefix(got.Message, "bad ") || !strings.HasSuffix(got.Message, " msg") || got.Session.Argv[1] != "a\uFFFDb" {
		t.Fatalf("unexpected decoded strings: %q %q", got.Message, got.Session.Argv)
	}
	if argv[1] != "a\xffb" {
		t.Fatal("Encode modified the caller's argv slice")
	}
}

func TestDecodeCommitRefuses(t *testing.T) {
	c := sampleCommit()
	good, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	body := string(good[len(commitMagic):])
	tree := testID("tree").String()
	tests := []struct {
		name string
		data string
	}{
		{"bad magic", "artcommit\x02\n" + body},
		{"no magic", body},
		{"unknown field", commitMagic + strings.Replace(body, `{"tree"`, `{"extra":1,"tree"`, 1)},
		{"unknown session field", commitMagic + strings.Replace(body, `"mode":"run"`, `"mode":"run","x":1`, 1)},
		{"trailing newline", commitMagic + body + "\n"},
		{"trailing object", commitMagic + body + "{}"},
		{"extra whitespace", commitMagic + strings.Replace(body, `,"time"`, `, "time"`, 1)},
		{"fields reordered", commitMagic + `{"parents":[],"tree":"` + tree + `","time":0,"author":"","message":""}`},
		{"missing parents", commitMagic + `{"tree":"` + tree + `","time":0,"author":"","message":""}`},
		{"null parents", commitMagic + `{"tree":"` + tree + `","parents":null,"time":0,"author":"","message":""}`},
		{"zero tree", commitMagic + `{"tree":"` + Zero.String() + `","parents":[],"time":0,"author":"","message":""}`},
		{"missing tree", commitMagic + `{"parents":[],"time":0,"author":"","message":""}`},
		{"uppercase id", commitMagic + `{"tree":"` + strings.ToUpper(tree) + `","parents":[],"time":0,"author":"","message":""}`},
		{"short id", commitMagic + `{"tree":"abcd","parents":[],"time":0,"author":"","message":""}`},
		{"exponent number", commitMagic + `{"tree":"` + tree + `","parents":[],"time":1e3,"author":"","message":""}`},
		{"unescaped html", commitMagic + `{"tree":"` + tree + `","parents":[],"time":0,"author":"","message":"<"}`},
		{"escaped invalid utf-8", commitMagic + `{"tree":"` + tree + `","parents":[],"time":0,"author":"","message":"\ufffd"}`},
		{"truncated", string(good[:len(good)-1])},
		{"empty", ""},
		{"not an object", commitMagic + "[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeCommit([]byte(tc.data))
			if err == nil {
				t.Fatalf("DecodeCommit accepted it: %+v", got)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotCanonical) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrNotCanonical", err)
			}
		})
	}
}

func TestCommitCorruptionNeverGivesWrongValue(t *testing.T) {
	b, id, err := EncodeCommit(sampleCommit())
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			c := append([]byte(nil), b...)
			c[i] ^= mask
			if Hash(c) == id {
				t.Fatalf("flip at %d keeps the id", i)
			}
			got, err := DecodeCommit(c)
			if err != nil {
				continue
			}
			again, err := got.Encode()
			if err != nil || !bytes.Equal(again, c) {
				t.Fatalf("flip at %d decoded to a value that does not re-encode to the input", i)
			}
		}
	}
}
