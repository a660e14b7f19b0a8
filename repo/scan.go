package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
)

// hostEntry is one path of a host workspace as a scan sees it.
type hostEntry struct {
	rel    string // slash-separated, relative to the workspace root
	typ    objects.Type
	mode   uint32
	size   int64
	mtime  int64
	ctime  int64
	ino    uint64
	target string       // symlinks
	id     objects.ID   // files: content id once known; directories: tree id once built
	known  bool         // id came from the stat cache
	old    *syncedEntry // what the sync state holds for this path, nil if nothing
	kids   []*hostEntry
	// rowSame (directories): the stored row of this directory lists
	// exactly these entries with the same stat (the ids of
	// subdirectories aside, which the scan does not know); rowTree is the
	// tree id that row records (zero if none).
	rowSame bool
	rowTree objects.ID
	// Directories only, filled by the scan of this directory (scans of
	// directories run in parallel; scan reports these in walk order).
	warns []string // skipped sockets, devices and .art look-alikes
	dead  []string // names of temporaries left by dead pulls
}

// syncedEntry is what the last push or pull recorded for a host path.
type syncedEntry struct {
	typ    objects.Type
	mode   uint32
	id     objects.ID
	size   int64
	mtime  int64
	ctime  int64
	ino    uint64
	target string
}

// sameStat reports whether the host entry provably still holds the synced
// content: same type, mode, size, times and inode.
func (s *syncedEntry) sameStat(h *hostEntry) bool {
	return s.typ == h.typ && s.mode == h.mode && s.size == h.size && s.mtime == h.mtime &&
		s.ctime == h.ctime && s.ino == h.ino && s.target == h.target
}

// scanner walks a host workspace, applying the exclusions every command
// shares: .art directories, .artignore, and the repository files.
type scanner struct {
	root     string
	rootFD   int // the workspace directory while scan runs (-1 otherwise)
	ignore   gitignore.Matcher
	skipIno  map[[2]uint64]bool // (dev, ino) of repository files
	skipPath map[string]bool    // absolute paths of repository files
	repoPath string             // the repository file, "" when none
	repoBase string             // its base name, which all its companions start with
	warn     func(string)
	synced   map[string][]byte // stored sync-state rows by directory (loadSyncRows)
	// syncedReady, when not nil, is closed once synced is loaded: a push
	// reads the rows while the scan lists and stats the first directories.
	syncedReady <-chan struct{}
	all         []*hostEntry // every entry in walk order (parents first)
	// deadTemps lists, per directory (rel), the temporary files that a
	// pull killed before its rename left behind (see isPullTemp).
	deadTemps map[string][]string
}

func newScanner(r *Repo, root string, warn func(string)) (*scanner, error) {
	s := &scanner{root: root, rootFD: -1, warn: warn, skipIno: map[[2]uint64]bool{}, skipPath: map[string]bool{}}
	if r != nil {
		s.repoPath = r.Path
		s.repoBase = filepath.Base(r.Path)
		for _, suf := range []string{"", "-wal", "-shm", "-journal"} {
			p := r.Path + suf
			s.skipPath[p] = true
			var st syscall.Stat_t
			if syscall.Stat(p, &st) == nil {
				s.skipIno[[2]uint64{uint64(st.Dev), st.Ino}] = true
			}
		}
	}
	ig := filepath.Join(root, IgnoreName)
	if data, err := readIgnoreFile(ig); err == nil {
		s.ignore = compileIgnore(string(data))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", ig, err)
	}
	return s, nil
}

// compileIgnore parses .artignore in gitignore syntax, with git's matcher
// semantics as go-git implements them (later patterns win, "!" re-includes,
// a slash before the end anchors a pattern to the workspace root, a
// trailing slash matches directories only, "**" spans directories).
func compileIgnore(text string) gitignore.Matcher {
	var ps []gitignore.Pattern
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, nil))
	}
	return gitignore.NewMatcher(ps)
}

// maxIgnoreSize bounds .artignore, which an agent's work can supply.
const maxIgnoreSize = 1 << 20

// readIgnoreFile reads .artignore, which must be a regular file (a fifo
// would block every command, /dev/zero would never end) of at most 1 MiB,
// and never through a symbolic link: an agent's .artignore linking to a
// root-only file made a push as root read it, and tell by what it left
// out what the file held.
func readIgnoreFile(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, errors.New("a symbolic link, which art does not follow; replace it with a file of ignore patterns")
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s); replace it with a file of ignore patterns", st.Mode().Type())
	}
	if st.Size() > maxIgnoreSize {
		return nil, fmt.Errorf("%d bytes, more than the %d a pattern file may have", st.Size(), maxIgnoreSize)
	}
	return io.ReadAll(io.LimitReader(f, maxIgnoreSize))
}

// excluded reports whether rel (slash-separated) is left out of the repository.
func (s *scanner) excluded(rel string, isDir bool) bool {
	if IsDirName(path.Base(rel)) {
		// Of any type: a .art link must never be written by a pull (art
		// would read config through it) nor stored by a push.
		return true
	}
	if s.ignore != nil && s.ignore.Match(strings.Split(rel, "/"), isDir) {
		return true
	}
	return false
}

// leftOut reports whether rel (slash-separated) or a directory it is in
// is left out of the repository (see excluded).
func (s *scanner) leftOut(rel string, isDir bool) bool {
	parts := strings.Split(rel, "/")
	for i := 1; i <= len(parts); i++ {
		if s.excluded(strings.Join(parts[:i], "/"), i < len(parts) || isDir) {
			return true
		}
	}
	return false
}

// isRepoFile reports whether the file name in directory dirAbs is the
// repository or one of its companions.
func (s *scanner) isRepoFile(dirAbs, name string, st *syscall.Stat_t) bool {
	if s.skipIno[[2]uint64{uint64(st.Dev), st.Ino}] {
		return true
	}
	if s.repoPath == "" || !strings.HasPrefix(name, s.repoBase) {
		return false // the common case, without building the path
	}
	abs := filepath.Join(dirAbs, name)
	// The overlay's journals are "<db>-wt<N>.journal".
	return s.skipPath[abs] || strings.HasPrefix(abs, s.repoPath+"-wt") && strings.HasSuffix(abs, ".journal")
}

// readAdvice is the next step after a host path could not be read.
func readAdvice(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errChanged):
		return "it was removed or replaced while art read the workspace; run the command again"
	case errors.Is(err, fs.ErrPermission):
		return "fix its permissions or add it to .artignore"
	}
	return "check the path, or add it to .artignore"
}

// isRepoPath reports whether abs is the repository or one of its
// companions, by name or (if it exists) by identity.
func (s *scanner) isRepoPath(abs string) bool {
	if s.repoPath == "" {
		return false
	}
	if s.skipPath[abs] || strings.HasPrefix(abs, s.repoPath+"-wt") && strings.HasSuffix(abs, ".journal") {
		return true
	}
	var st unix.Stat_t
	return lstatPath(abs, &st) == nil && s.skipIno[[2]uint64{st.Dev, st.Ino}]
}

// holdsRepo reports whether the directory abs contains the repository.
func (s *scanner) holdsRepo(abs string) bool {
	return s.repoPath != "" && strings.HasPrefix(s.repoPath, abs+"/")
}

// statType is the entry type of a stat mode (0 for sockets and devices).
func statType(mode uint32) objects.Type {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return objects.TypeFile
	case unix.S_IFDIR:
		return objects.TypeDir
	case unix.S_IFLNK:
		return objects.TypeSymlink
	case unix.S_IFIFO:
		return objects.TypeFifo
	}
	return 0
}

func entryFromStat(rel string, st *syscall.Stat_t) (*hostEntry, bool) {
	e := &hostEntry{
		rel:   rel,
		mode:  st.Mode & objects.PermMask,
		mtime: objects.TimeNs(st.Mtim.Sec, st.Mtim.Nsec),
		ctime: objects.TimeNs(st.Ctim.Sec, st.Ctim.Nsec),
		ino:   st.Ino,
		typ:   statType(st.Mode),
	}
	if e.typ == objects.TypeFile || e.typ == objects.TypeSymlink {
		e.size = st.Size
	}
	return e, e.typ != 0
}

// scan walks the workspace. The root entry has rel "".
//
// Directories are read in parallel (a few per core: the cost is the
// kernel's getdents and fstatat, and it waits on the disk when the tree is
// cold); s.all is the same as a sequential walk's (every directory's
// entries sorted, parents first), and warnings come directory by directory
// in that order.
func (s *scanner) scan() (*hostEntry, error) {
	// Every directory below is opened from this one, never through a
	// link (scanDir): by path, a directory of the workspace swapped for a
	// link after its parent's scan had the scan list, stat and read the
	// link targets of whatever it led to (another user's private
	// directory, /root), which push recorded and status listed. The
	// workspace itself is opened following no other user's link
	// (openWorkspaceDir), and its attributes are the descriptor's.
	rootFD, err := openWorkspaceDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", s.root, err)
	}
	defer func() { unix.Close(rootFD); s.rootFD = -1 }()
	var st syscall.Stat_t
	if err := syscall.Fstat(rootFD, &st); err != nil {
		return nil, fmt.Errorf("scan %s: %w", s.root, err)
	}
	root, _ := entryFromStat("", &st)
	if root.typ != objects.TypeDir {
		return nil, fmt.Errorf("scan %s: not a directory", s.root)
	}
	s.rootFD = rootFD
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(2 * runtime.NumCPU())
	var walk func(d *hostEntry) error
	walk = func(d *hostEntry) error {
		if ctx.Err() != nil {
			return nil // another directory failed; its error is reported
		}
		if err := s.scanDir(d); err != nil {
			return err
		}
		for _, k := range d.kids {
			if k.typ != objects.TypeDir {
				continue
			}
			if !g.TryGo(func() error { return walk(k) }) {
				if err := walk(k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	g.Go(func() error { return walk(root) })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.collect(root)
	return root, nil
}

// collect lists the scanned tree in walk order (parents first) and reports
// what the scans of its directories found.
func (s *scanner) collect(d *hostEntry) {
	s.all = append(s.all, d)
	if d.typ != objects.TypeDir {
		return
	}
	for _, w := range d.warns {
		if s.warn != nil {
			s.warn(w)
		}
	}
	if len(d.dead) > 0 {
		if s.deadTemps == nil {
			s.deadTemps = map[string][]string{}
		}
		s.deadTemps[d.rel] = d.dead
	}
	for _, k := range d.kids {
		s.collect(k)
	}
}

// scanDir reads one directory into dir.kids. It only reads the scanner's
// shared state, so directories can be scanned concurrently.
func (s *scanner) scanDir(dir *hostEntry) error {
	abs := filepath.Join(s.root, filepath.FromSlash(dir.rel))
	dfd, names, err := s.readDirBeneath(dir.rel, abs)
	if err != nil {
		return fmt.Errorf("read directory %s: %w (%s)", abs, err, readAdvice(err))
	}
	defer unix.Close(dfd)
	sort.Strings(names)
	for _, name := range names {
		rel := name
		if dir.rel != "" {
			rel = dir.rel + "/" + name
		}
		// fstatat on the directory: no path walk per entry.
		var st syscall.Stat_t
		if err := fstatat(dfd, name, &st); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue // deleted while we looked
			}
			return fmt.Errorf("stat %s: %w", filepath.Join(abs, name), err)
		}
		e, ok := entryFromStat(rel, &st)
		if !ok {
			dir.warns = append(dir.warns, fmt.Sprintf("skipping %s: sockets and device files are not stored", filepath.Join(abs, name)))
			continue
		}
		if s.excluded(rel, e.typ == objects.TypeDir) || (e.typ == objects.TypeFile && s.isRepoFile(abs, name, &st)) {
			if name != DirName && IsDirName(name) {
				// Left out silently, the user's .Art would look stored.
				dir.warns = append(dir.warns, fmt.Sprintf("skipping %s: art reserves the name %s in any case; rename it to store it", filepath.Join(abs, name), DirName))
			}
			continue
		}
		if pid, ok := isPullTemp(name); ok && e.typ != objects.TypeDir {
			// A pull's temporary is never workspace content; one whose
			// pull died is garbage the next pull removes.
			if !ProcessAlive(pid, 0) {
				dir.dead = append(dir.dead, name)
			}
			continue
		}
		if !objects.ValidName(name) {
			return fmt.Errorf("cannot store %s: the name is not valid in a tree", filepath.Join(abs, name))
		}
		if e.typ == objects.TypeSymlink {
			p := filepath.Join(abs, name)
			buf := make([]byte, objects.MaxTargetLen+1)
			n, err := unix.Readlinkat(dfd, name, buf)
			if err != nil {
				return fmt.Errorf("read link %s: %w", p, err)
			}
			if n == 0 || n > objects.MaxTargetLen {
				return fmt.Errorf("cannot store link %s: target length %d", p, n)
			}
			e.target = string(buf[:n])
			e.size = int64(n)
		}
		dir.kids = append(dir.kids, e)
	}
	s.matchSynced(dir)
	return nil
}

// matchSynced sets old (and, for files whose stat is unchanged, id) on
// the entries of a scanned directory from its stored row, and the
// directory's rowSame. Both lists are sorted by name: a merge, with no map.
func (s *scanner) matchSynced(dir *hostEntry) {
	if s.syncedReady != nil {
		<-s.syncedReady
	}
	row, ok := s.synced[dir.rel]
	if !ok {
		return
	}
	var stored []syncedEntry
	var names []string
	tree, err := decodeSyncRow(dir.rel, row, func(name string, e *syncedEntry) {
		names = append(names, name)
		stored = append(stored, *e)
	})
	if err != nil {
		return // a damaged row: this directory counts as never synced
	}
	dir.rowTree = tree
	dir.rowSame = len(stored) == len(dir.kids)
	i := 0
	for _, e := range dir.kids {
		name := path.Base(e.rel)
		for i < len(names) && names[i] < name {
			i++
		}
		if i == len(names) || names[i] != name {
			dir.rowSame = false
			continue
		}
		e.old = &stored[i]
		if !e.old.sameStat(e) {
			dir.rowSame = false
		} else if e.typ == objects.TypeFile {
			e.id, e.known = e.old.id, true
		}
	}
}

// IsPullTempName reports whether name is one a pull gives its temporary
// files: the overlay refuses it, as push and pull never store it.
func IsPullTempName(name string) bool {
	_, ok := isPullTemp(name)
	return ok
}

// isPullTemp reports whether name is a temporary of a pull
// (".art-pull-tmp-PID-HEX", see createTemp) and returns the pid.
func isPullTemp(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, pullTemp+"-")
	if !ok {
		return 0, false
	}
	pid, hex, ok := strings.Cut(rest, "-")
	if !ok || pid == "" || hex == "" || len(pid) > 10 || len(hex) > 16 {
		return 0, false
	}
	n := 0
	for _, c := range pid {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, false
		}
	}
	return n, n > 0
}

// readDir opens a directory and lists its names (without "." and ".."); the
// caller closes the returned descriptor. It uses the system calls directly:
// os.File would also register each directory with the poller and switch
// its blocking mode back and forth, five calls per directory that cost a
// push of an 11k-file tree several milliseconds.
func readDir(abs string) (int, []string, error) {
	return listOpened(openPath(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0))
}

// listOpened lists directory fd, just opened (with err), and returns it
// open, or closed with the error.
func listOpened(fd int, err error) (int, []string, error) {
	if err != nil {
		return -1, nil, err
	}
	names, err := readNames(fd)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, names, nil
}

// readNames lists the names of open directory fd (without "." and "..").
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 16<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// readDirBeneath is readDir of the workspace's directory rel (abs by
// path), opened from the scan's root descriptor with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: a link in any component, which
// the scan of its parent saw as a directory, is errChanged.
func (s *scanner) readDirBeneath(rel, abs string) (int, []string, error) {
	root := s.rootFD
	if root < 0 { // outside scan
		fd, err := openWorkspaceDir(s.root)
		if err != nil {
			return -1, nil, err
		}
		defer unix.Close(fd)
		root = fd
	}
	name := filepath.FromSlash(rel)
	if name == "" {
		name = "."
	}
	fd, err := openBeneath(root, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.6: the last component only
		return readDir(abs)
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) && rel != "" {
		// Its parent's scan saw a directory there.
		return -1, nil, errChanged
	}
	return listOpened(fd, err)
}

func fstatat(dfd int, name string, st *syscall.Stat_t) error {
	var ust unix.Stat_t
	if err := unix.Fstatat(dfd, name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	*st = syscall.Stat_t{Dev: ust.Dev, Ino: ust.Ino, Nlink: ust.Nlink, Mode: ust.Mode, Uid: ust.Uid, Gid: ust.Gid,
		Rdev: ust.Rdev, Size: ust.Size, Blksize: ust.Blksize, Blocks: ust.Blocks,
		Atim: syscall.Timespec(ust.Atim), Mtim: syscall.Timespec(ust.Mtim), Ctim: syscall.Timespec(ust.Ctim)}
	return nil
}
