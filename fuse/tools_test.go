package fuse

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/repo"
)

// requireTool skips when a program the test drives is not installed.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed, skipping: %v", name, err)
	}
	return p
}

// run runs a command and fails the test with its output on error.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tailOf(string(out), 4000))
	}
	return string(out)
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// TestFio: random 4 KiB writes with crc32c verification, verified again
// after a remount of the same worktree and after a commit.
func TestFio(t *testing.T) {
	requireTool(t, "fio")
	m := newTestMount(t, setupCasesLower)
	size := "64M"
	if testing.Short() {
		size = "16M"
	}
	job := func(extra ...string) []string {
		return append([]string{"--name=art", "--directory=" + m.WS(), "--filename=fio.data", "--size=" + size, "--bs=4k",
			"--rw=randwrite", "--ioengine=psync", "--verify=crc32c", "--randrepeat=1", "--randseed=1234",
			"--verify_fatal=1", "--error_dump=1"}, extra...)
	}
	// fio saves its verify state in its working directory: a temporary
	// one, not the package's source directory.
	cwd := t.TempDir()
	out := run(t, cwd, nil, "fio", job("--do_verify=1", "--fsync=256")...)
	if strings.Contains(out, "verify:") && strings.Contains(out, "bad") {
		t.Fatalf("fio reported verify errors:\n%s", tailOf(out, 4000))
	}
	t.Logf("fio:\n%s", tailOf(out, 1500))
	m.Remount()
	run(t, cwd, nil, "fio", job("--verify_only")...)
	m.Commit("fio")
	run(t, cwd, nil, "fio", job("--verify_only")...)
}

// TestGit: git init/add/commit of a few hundred files inside the mount,
// then git fsck and a clean status live, after a remount and after a
// commit.
func TestGit(t *testing.T) {
	requireTool(t, "git")
	m := newTestMount(t, setupCasesLower)
	dir := m.WS("proj")
	for i := 0; i < 300; i++ {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%17), fmt.Sprintf("file%03d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		content := fmt.Sprintf("package pkg%02d\n\n// File %d.\nvar V%d = %q\n", i%17, i, i, strings.Repeat("x", i*13))
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()}
	run(t, dir, env, "git", "init", "-q", "-b", "main")
	run(t, dir, env, "git", "add", "-A")
	run(t, dir, env, "git", "commit", "-q", "-m", "initial")
	// A second commit that renames, edits and deletes.
	run(t, dir, env, "git", "mv", "pkg00", "renamed")
	os.WriteFile(filepath.Join(dir, "pkg01", "file001.go"), []byte("package pkg01\n// edited\n"), 0o644)
	run(t, dir, env, "git", "rm", "-q", "-r", "pkg02")
	run(t, dir, env, "git", "commit", "-q", "-a", "-m", "second")
	run(t, dir, env, "git", "gc", "-q")
	check := func(stage string) {
		run(t, dir, env, "git", "fsck", "--full", "--strict")
		if out := run(t, dir, env, "git", "status", "--porcelain"); out != "" {
			t.Errorf("%s: git status not clean:\n%s", stage, out)
		}
		if out := run(t, dir, env, "git", "log", "--oneline"); strings.Count(out, "\n") != 2 {
			t.Errorf("%s: git log:\n%s", stage, out)
		}
		if n := strings.Count(run(t, dir, env, "git", "ls-files"), "\n"); n != 300-18 {
			t.Errorf("%s: %d files tracked", stage, n)
		}
	}
	check("live")
	m.Remount()
	check("remounted")
	m.Commit("git")
	check("committed")
}

// goSrcSubset returns directories of the Go toolchain's own source tree.
func goSrcSubset(t *testing.T) (string, []string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	dirs := []string{"net/http", "crypto"}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(src, d)); err != nil {
			t.Skipf("Go source tree not available: %v", err)
		}
	}
	return src, dirs
}

// TestTar: tar -x of a real tree (part of the Go source) into the mount,
// compared with diff -r; then a commit whose tree, pulled into a host
// directory, is compared again.
func TestTar(t *testing.T) {
	requireTool(t, "tar")
	requireTool(t, "diff")
	src, dirs := goSrcSubset(t)
	tarball := filepath.Join(t.TempDir(), "src.tar")
	run(t, src, nil, "tar", append([]string{"-cf", tarball}, dirs...)...)
	m := newTestMount(t, setupCasesLower)
	dst := m.WS("src")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dst, nil, "tar", "-xf", tarball)
	for _, d := range dirs {
		run(t, "", nil, "diff", "-r", "--no-dereference", filepath.Join(src, d), filepath.Join(dst, d))
	}
	id := m.Commit("untar")
	// The commit, pulled into a host directory named like the workspace.
	pulled := filepath.Join(t.TempDir(), wsName)
	if _, err := m.Repo.Pull(repo.PullOptions{Dir: pulled, Commit: id}); err != nil {
		t.Fatalf("pull: %v", err)
	}
	for _, d := range dirs {
		run(t, "", nil, "diff", "-r", "--no-dereference", filepath.Join(src, d), filepath.Join(pulled, "src", d))
		run(t, "", nil, "diff", "-r", "--no-dereference", filepath.Join(src, d), filepath.Join(m.WS("src"), d))
	}
	run(t, "", nil, "diff", "-r", "--no-dereference", filepath.Join(pulled, "dir"), m.WS("dir"))
}
