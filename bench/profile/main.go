// Command profile drives the repo package the way bench/repo.sh drives the
// art binary, with CPU profiles around each step, and reports where the
// repository's bytes go (SQLite's dbstat table). It is a diagnosis tool for
// the bars of bench/repo.sh, not a benchmark of its own.
//
//	cp -a "$(go env GOROOT)/src" /tmp/prof/src
//	go run ./bench/profile -ws /tmp/prof/src -out /tmp/prof
//	go tool pprof -top -nodecount=30 /tmp/prof/push1.cpu
//
// The workspace is modified: .art/ is created in it and one line is appended
// to one .go file per incremental push.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

func main() {
	ws := flag.String("ws", "", "scratch workspace (a copy of a tree; it is modified)")
	out := flag.String("out", os.TempDir(), "directory for the .cpu profiles")
	pushes := flag.Int("pushes", 5, "incremental pushes (one appended line each) in push2.cpu")
	diffs := flag.Int("diffs", 200, "open+diff+close rounds in diff.cpu")
	sizes := flag.Bool("sizes", false, "after the first push, estimate the repository size with other zstd levels and page sizes")
	flag.Parse()
	if *ws == "" {
		log.Fatal("usage: profile -ws DIR [-out DIR] [-pushes N] [-diffs N]")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	db := filepath.Join(*ws, ".art", "art.db")
	ctx := context.Background()

	r, err := repo.Init(db)
	if err != nil {
		log.Fatal(err)
	}
	profile(filepath.Join(*out, "push1.cpu"), "first push", func() error {
		res, err := r.Push(ctx, repo.PushOptions{Dir: *ws, Message: "first"})
		if err == nil {
			fmt.Printf("  %d files, %d new objects, %d bytes stored\n", res.Files, res.NewObjects, res.NewBytes)
		}
		return err
	})
	if err := r.Close(); err != nil {
		log.Fatal(err)
	}
	dbstat(db)
	if *sizes {
		zstdLevels(db)
		pageSizes(db, *out)
	}

	target := goFile(*ws)
	profile(filepath.Join(*out, "push2.cpu"), fmt.Sprintf("%d incremental pushes (open, push, close)", *pushes), func() error {
		for i := 0; i < *pushes; i++ {
			f, err := os.OpenFile(target, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			fmt.Fprintf(f, "// profile %d\n", i)
			f.Close()
			r, err := repo.Open(db)
			if err != nil {
				return err
			}
			t := time.Now()
			res, err := r.Push(ctx, repo.PushOptions{Dir: *ws, Message: fmt.Sprint("push ", i)})
			if err != nil {
				return err
			}
			fmt.Printf("  push %d: %d hashed, %d new objects in %v\n", i, res.Hashed, res.NewObjects, time.Since(t).Round(time.Millisecond))
			if err := r.Close(); err != nil {
				return err
			}
		}
		return nil
	})

	profile(filepath.Join(*out, "diff.cpu"), fmt.Sprintf("%d rounds of open + diff HEAD~1 HEAD + close", *diffs), func() error {
		for i := 0; i < *diffs; i++ {
			if err := diff(db); err != nil {
				return err
			}
		}
		return nil
	})
}

// profile runs f under the CPU profiler and prints its wall time.
func profile(path, what string, f func() error) {
	pf, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		log.Fatal(err)
	}
	t := time.Now()
	err = f()
	d := time.Since(t)
	pprof.StopCPUProfile()
	pf.Close()
	if err != nil {
		log.Fatalf("%s: %v", what, err)
	}
	fmt.Printf("%s: %v (profile %s)\n", what, d.Round(time.Millisecond), path)
}

// diff does what 'art diff HEAD~1 HEAD' does, minus printing.
func diff(db string) error {
	r, err := repo.Open(db)
	if err != nil {
		return err
	}
	defer r.Close()
	var trees [2]objects.ID
	for i, rev := range []string{"HEAD~1", "HEAD"} {
		id, err := r.Resolve(rev)
		if err != nil {
			return err
		}
		c, err := r.LoadCommit(id)
		if err != nil {
			return err
		}
		trees[i] = c.Tree
	}
	changes, err := r.DiffTrees(trees[0], trees[1], nil)
	if err != nil {
		return err
	}
	for _, c := range changes {
		if _, err := r.MakePatch(c); err != nil {
			return err
		}
	}
	return nil
}

// goFile picks the file bench/repo.sh changes: fmt/print.go, else the first .go file.
func goFile(ws string) string {
	if p := filepath.Join(ws, "fmt", "print.go"); fileExists(p) {
		return p
	}
	var first string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || first != "" {
			return fs.SkipDir
		}
		if d.IsDir() && d.Name() == ".art" {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			first = p
		}
		return nil
	})
	if first == "" {
		log.Fatalf("no .go file under %s", ws)
	}
	return first
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// dbstat prints, per table and index, the bytes SQLite uses for it.
func dbstat(db string) {
	st, err := os.Stat(db)
	if err != nil {
		log.Fatal(err)
	}
	r, err := repo.Open(db)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	rows, err := r.DB.Query(`SELECT name, COUNT(*), SUM(pgsize), SUM(payload), SUM(unused), SUM(pagetype = 'overflow') FROM dbstat GROUP BY name`)
	if err != nil {
		fmt.Printf("dbstat unavailable: %v\n", err)
		return
	}
	defer rows.Close()
	type stat struct {
		name                             string
		pages, size, payload, unused, ov int64
	}
	var all []stat
	var total int64
	for rows.Next() {
		var s stat
		if err := rows.Scan(&s.name, &s.pages, &s.size, &s.payload, &s.unused, &s.ov); err != nil {
			log.Fatal(err)
		}
		all = append(all, s)
		total += s.size
	}
	if err := rows.Err(); err != nil {
		log.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].size > all[j].size })
	var freelist int64
	r.DB.QueryRow(`PRAGMA freelist_count`).Scan(&freelist)
	var pageSize int64
	r.DB.QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	fmt.Printf("repository file %d bytes, page size %d, %d free pages; per b-tree:\n", st.Size(), pageSize, freelist)
	fmt.Printf("  %-34s %8s %12s %12s %12s %8s\n", "name", "pages", "bytes", "payload", "unused", "overflow")
	for _, s := range all {
		fmt.Printf("  %-34s %8d %12d %12d %12d %8d\n", s.name, s.pages, s.size, s.payload, s.unused, s.ov)
	}
	fmt.Printf("  %-34s %8s %12d\n", "total", "", total)
	var n, raw, stored int64
	r.DB.QueryRow(`SELECT COUNT(*), COALESCE(SUM(size),0), COALESCE(SUM(length(data)),0) FROM chunks`).Scan(&n, &raw, &stored)
	fmt.Printf("chunks: %d, %d raw bytes, %d stored bytes\n", n, raw, stored)
}

// zstdLevels recompresses every stored chunk at other zstd levels (keeping
// a chunk raw when compression saves less than 1/32, as objects.Compress
// does) and prints the chunk bytes each level would store.
func zstdLevels(db string) {
	r, err := repo.Open(db)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	levels := []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression}
	encs := make([]*zstd.Encoder, len(levels))
	for i, l := range levels {
		if encs[i], err = zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1)); err != nil {
			log.Fatal(err)
		}
	}
	totals := make([]int64, len(levels))
	rows, err := r.DB.Query(`SELECT size, enc, data FROM chunks`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var size, enc int
		var data []byte
		if err := rows.Scan(&size, &enc, &data); err != nil {
			log.Fatal(err)
		}
		raw, err := objects.Decompress(data, enc, size)
		if err != nil {
			log.Fatal(err)
		}
		for i, e := range encs {
			n := len(raw)
			if len(raw) >= 64 {
				if c := e.EncodeAll(raw, nil); len(c) < len(raw)-len(raw)/32 {
					n = len(c)
				}
			}
			totals[i] += int64(n)
		}
	}
	if err := rows.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("chunk bytes stored per zstd level (each chunk compressed on its own):")
	for i, l := range levels {
		fmt.Printf("  %-24s %12d\n", l.String(), totals[i])
	}
}

// pageSizes VACUUMs copies of the repository at several page sizes and
// prints the file sizes.
func pageSizes(db, out string) {
	fmt.Println("repository file after VACUUM into a copy, per page size:")
	for _, ps := range []int{1024, 2048, 4096, 8192, 16384, 65536} {
		cp := filepath.Join(out, fmt.Sprintf("vacuum-%d.db", ps))
		if err := copyFile(db, cp); err != nil {
			log.Fatal(err)
		}
		h, err := sql.Open("sqlite", cp)
		if err != nil {
			log.Fatal(err)
		}
		h.SetMaxOpenConns(1)
		for _, q := range []string{`PRAGMA journal_mode=DELETE`, fmt.Sprintf(`PRAGMA page_size=%d`, ps), `VACUUM`} {
			if _, err := h.Exec(q); err != nil {
				log.Fatalf("%s: %v", q, err)
			}
		}
		h.Close()
		st, err := os.Stat(cp)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  %6d  %12d\n", ps, st.Size())
		os.Remove(cp)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}
