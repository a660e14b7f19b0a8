package cmd

// Path policies through art run (issue 6): --preset, --allow, --explain and
// the host's .art/config/policy.json.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policyProbe tries every operation and prints "NAME=RESULT" lines, RESULT
// being OK or the errno name.
const policyProbe = `
import errno, os, subprocess
def probe(name, f):
    try:
        f()
        print(name + "=OK")
    except OSError as e:
        print(name + "=" + errno.errorcode.get(e.errno, str(e.errno)))
def write(path, mode="w"):
    with open(path, mode) as f:
        f.write("agent was here\n")
def read(path):
    with open(path) as f:
        f.read()
print("ls=" + " ".join(sorted(os.listdir("."))))
print("ls config=" + " ".join(sorted(os.listdir("config"))))
probe("cat .env", lambda: read(".env"))
probe("cat secrets/db.txt", lambda: read("secrets/db.txt"))
probe("stat secrets", lambda: os.stat("secrets"))
probe("cat config/.env", lambda: read("config/.env"))
probe("create .env", lambda: write(".env"))
probe("create config/.env", lambda: write("config/.env"))
probe("mkdir secrets", lambda: os.mkdir("secrets"))
probe("write hook", lambda: write(".git/hooks/pre-commit", "a"))
probe("truncate hook", lambda: os.truncate(".git/hooks/pre-commit", 0))
probe("chmod hook", lambda: os.chmod(".git/hooks/pre-commit", 0o644))
probe("read hook", lambda: read(".git/hooks/pre-commit"))
probe("mv secrets s2", lambda: os.rename("secrets", "s2"))
probe("mv config c2", lambda: os.rename("config", "c2"))
probe("rmdir config", lambda: os.rmdir("config"))
probe("mv .git/hooks h2", lambda: os.rename(".git/hooks", "h2"))
probe("mv ws", lambda: os.rename("/home/agent/ws", "/home/agent/ws2"))
probe("write main.go", lambda: write("main.go", "a"))
print("rm -rf .git=%d" % subprocess.run(["rm", "-rf", ".git"], stderr=subprocess.DEVNULL).returncode)
print("rm -rf config=%d" % subprocess.run(["rm", "-rf", "config"], stderr=subprocess.DEVNULL).returncode)
print("hook exists=%s" % os.path.exists(".git/hooks/pre-commit"))
`

// TestRunPolicyAgentSafe: with --preset agent-safe secrets are invisible
// and cannot be created, files that run code on export are read-only, no
// rename or removal of a parent exposes or deletes them, the rest is
// writable; the commit keeps the protected content exactly and records the
// policy.
func TestRunPolicyAgentSafe(t *testing.T) {
	files := map[string]string{
		".env":                  "SECRET=1\n",
		"secrets/db.txt":        "password\n",
		".git/hooks/pre-commit": "#!/bin/sh\necho hook\n",
		"main.go":               "package main\n",
		"config/.env":           "NESTED=1\n",
	}
	r := newRepoNamed(t, "ws", files, func(ws string) {
		os.Chmod(filepath.Join(ws, ".git/hooks/pre-commit"), 0o755)
	})
	base := r.head()
	res := r.run("--preset", "agent-safe", "--", "python3", "-c", policyProbe)
	if res.code != 0 {
		t.Fatalf("%s", res)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"ls":                 ".git config main.go",
		"ls config":          "",
		"cat .env":           "ENOENT",
		"cat secrets/db.txt": "ENOENT",
		"stat secrets":       "ENOENT",
		"cat config/.env":    "ENOENT",
		"write hook":         "EACCES",
		"read hook":          "OK",
		"write main.go":      "OK",
		"hook exists":        "True",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	// These must fail; the errno may vary.
	for _, k := range []string{"create .env", "create config/.env", "mkdir secrets", "truncate hook", "chmod hook",
		"mv secrets s2", "mv config c2", "rmdir config", "mv .git/hooks h2", "mv ws"} {
		if v, ok := got[k]; !ok || v == "OK" {
			t.Errorf("%s: %q, want a failure", k, v)
		}
	}
	for _, k := range []string{"rm -rf .git", "rm -rf config"} {
		if got[k] == "0" {
			t.Errorf("%s succeeded", k)
		}
	}
	t.Logf("probe output:\n%s", res.stdout)
	// The agent saw EACCES alone; art says the policy refused changes.
	checkContains(t, "stderr", res.stderr, "art: the path policy refused ", " change(s) the agent tried, the first at ws/", "('art run --explain PATH' names the rule that decides a path)")

	// The commit: only main.go changed; the protected content is kept.
	if ns := r.nameStatus(base, "HEAD"); len(ns) != 1 || ns["ws/main.go"] != "M" {
		t.Errorf("art diff --name-status: %v, want only ws/main.go modified", ns)
	}
	export := filepath.Join(r.base, "export", "ws")
	if err := os.MkdirAll(export, 0o755); err != nil {
		t.Fatal(err)
	}
	r.mustArt("pull", "-d", r.db, "-m", export, "--commit", "HEAD")
	for name, content := range files {
		if name == "main.go" {
			content += "agent was here\n"
		}
		if got := readFile(t, filepath.Join(export, name)); got != content {
			t.Errorf("exported %s = %q, want %q", name, got, content)
		}
	}
	if st, err := os.Stat(filepath.Join(export, ".git/hooks/pre-commit")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("exported hook: %v %v, want mode 0755", st.Mode(), err)
	}
	c := r.show("HEAD")
	if c.Session == nil || !bytes.Contains(c.Session.Policy, []byte("agent-safe")) {
		t.Errorf("the session's policy is not recorded: %+v", c.Session)
	}
	checkContains(t, "art show", r.mustArt("show", "HEAD").stdout, "policy:", "preset agent-safe")
	if plain := r.run("--", "sh", "-c", "echo x >> main.go; chmod 0 .git"); plain.code != 0 || strings.Contains(plain.stderr, "path policy") {
		t.Errorf("a session without a policy: %s", plain)
	}
}

// TestRunPolicyExplain: --explain prints the deciding rule and runs nothing.
func TestRunPolicyExplain(t *testing.T) {
	r := newRepoNamed(t, "ws", map[string]string{"main.go": "package main\n"}, nil)
	n := r.commitCount()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--preset", "agent-safe", "--explain", "ws/.env"}, []string{"ws/.env: none", `".env"`, "preset agent-safe"}},
		{[]string{"--preset", "agent-safe", "--explain", "ws/.git/hooks/pre-commit"}, []string{"ws/.git/hooks/pre-commit: read"}},
		{[]string{"--preset", "agent-safe", "--explain", "/ws/main.go"}, []string{"ws/main.go: write"}},
		{[]string{"--explain", "ws/.env"}, []string{"ws/.env: write", "default"}},
		{[]string{"--preset", "agent-safe", "--allow", "ws/.env=read", "--explain", "ws/.env"}, []string{"ws/.env: read", "--allow"}},
	}
	for _, tc := range tests {
		res := r.run(append(tc.args, "--", "sh", "-c", "echo RAN")...)
		if res.code != 0 {
			t.Errorf("%q: %s", tc.args, res)
			continue
		}
		checkContains(t, strings.Join(tc.args, " "), res.stdout, tc.want...)
		checkLacks(t, strings.Join(tc.args, " "), res.stdout, "RAN")
	}
	r.checkNothingRecorded(n)
}

// TestRunPolicyBadInput: an unknown preset, a bad --allow or an invalid
// policy.json stops art run: exit 125, a message, nothing started.
func TestRunPolicyBadInput(t *testing.T) {
	r := newRepoNamed(t, "ws", map[string]string{"main.go": "package main\n"}, nil)
	tests := []struct {
		name   string
		args   []string
		policy string
		want   []string
	}{
		{"unknown preset", []string{"--preset", "nope"}, "", []string{`"nope"`, "full-access", "development", "agent-safe", "read-only"}},
		{"unknown permission", []string{"--allow", "x=bogus"}, "", []string{"bogus", "none, view, read, write"}},
		{"malformed pattern", []string{"--allow", "[="}, "", []string{"--allow"}},
		{"unclosed bracket", []string{"--allow", "[a=read"}, "", []string{"--allow", "[a"}},
		{"empty pattern", []string{"--allow", "=read"}, "", []string{"--allow"}},
		{"no permission", []string{"--allow", "x"}, "", []string{"--allow"}},
		{"policy.json not JSON", nil, `{"rules": [`, []string{"policy.json"}},
		{"policy.json unknown permission", nil, `{"rules": [{"pattern": "x", "permission": "maybe"}]}`, []string{"policy.json", "maybe"}},
		{"policy.json empty pattern", nil, `[{"pattern": "", "permission": "none"}]`, []string{"policy.json"}},
	}
	policyPath := filepath.Join(r.ws, ".art", "config", "policy.json")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			os.Remove(policyPath)
			if tc.policy != "" {
				r.writeConfig("policy.json", tc.policy)
			}
			n := r.commitCount()
			res := r.run(append(tc.args, "--", "sh", "-c", "echo RAN")...)
			if res.code != 125 {
				t.Errorf("exit %d, want 125\n%s", res.code, res)
			}
			if res.stdout != "" {
				t.Errorf("stdout %q, want nothing (nothing may run)", res.stdout)
			}
			checkContains(t, "stderr", res.stderr, append([]string{"art: "}, tc.want...)...)
			r.checkNothingRecorded(n)
		})
	}
	r.t = t
	os.Remove(policyPath)
}
