package cmd

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rogpeppe/go-internal/testscript"
	_ "modernc.org/sqlite"
)

// TestMain registers the programs the scripts run: art itself and small
// helpers that prepare hostile or damaged repositories.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"art":                func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"art-test-setschema": func() { os.Exit(setSchemaMain(os.Args[1:])) },
		"art-test-sql":       func() { os.Exit(sqlMain(os.Args[1:])) },
		"art-test-mksock":    func() { os.Exit(mkSockMain(os.Args[1:])) },
		"art-test-deadfuse":  func() { os.Exit(deadFUSEMain(os.Args[1:])) },
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			env.Setenv("TZ", "UTC")
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Getuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":  cmdExitCode,
			"capture":   cmdCapture,
			"writefile": cmdWriteFile,
		},
	})
}

// exitcode N PROG ARGS... runs PROG and checks that it exits with N;
// stdout and stderr are kept for the following stdout/stderr checks.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: bad status %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: running %s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// capture NAME REGEXP sets $NAME to the first submatch of REGEXP in the
// last command's stdout.
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: capture NAME REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("capture: %q does not match stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// writefile PATH TEXT writes TEXT, with Go escapes such as \x00
// interpreted, to PATH.
func cmdWriteFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: writefile PATH TEXT")
	}
	text, err := strconv.Unquote(`"` + args[1] + `"`)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(text), 0o644))
}

// art-test-setschema DB VERSION rewrites the schema version of a repository.
func setSchemaMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: art-test-setschema DB VERSION")
		return 2
	}
	return sqlMain([]string{args[0], "UPDATE meta SET value='" + args[1] + "' WHERE key='schema_version'"})
}

// art-test-sql DB STATEMENT... runs SQL statements on a database file
// without any of art's checks, to damage repositories on purpose.
func sqlMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: art-test-sql DB STATEMENT...")
		return 2
	}
	db, err := sql.Open("sqlite", args[0])
	if err == nil {
		for _, q := range args[1:] {
			var res sql.Result
			if res, err = db.Exec(q); err != nil {
				break
			}
			if n, _ := res.RowsAffected(); n == 0 && strings.HasPrefix(strings.ToUpper(q), "UPDATE") {
				err = fmt.Errorf("%q changed no row", q)
				break
			}
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "art-test-sql:", err)
		return 1
	}
	return 0
}

// art-test-mksock PATH leaves a unix socket file at PATH.
func mkSockMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: art-test-mksock PATH")
		return 2
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		err = syscall.Bind(fd, &syscall.SockaddrUnix{Name: args[0]})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "art-test-mksock:", err)
		return 1
	}
	return 0
}

// art-test-deadfuse DIR mounts an empty filesystem of type fuse.art at DIR
// and exits without unmounting it: the kernel aborts the connection, and
// the mount stays, dead, as one whose art was killed. Nothing of it is in
// the kernel's caches (no timeouts), so every access to it fails, even a
// stat of its root.
func deadFUSEMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: art-test-deadfuse DIR")
		return 2
	}
	_, err := fs.Mount(args[0], &fs.Inode{}, &fs.Options{MountOptions: fuse.MountOptions{Name: "art", FsName: "art-test-dead"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "art-test-deadfuse:", err)
		return 1
	}
	return 0
}
