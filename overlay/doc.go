// Package overlay is the copy-on-write filesystem model of a worktree,
// independent of FUSE: a read-only lower layer (the tree of the worktree's
// base commit, served from the object store) and an upper layer of changes
// kept in memory and persisted to the worktree's SQLite tables.
//
// Identity. Every node is an inode number, never a path. A lower node's
// number is derived from its parent's number and its name (high bit set),
// so it is the same on every mount of the worktree; nodes created in the
// upper layer get numbers from a per-worktree counter (high bit clear).
// Copy-up keeps the number, so renames, hard links and open files survive.
//
// Upper layer. A changed or created node has an upper inode; a directory
// with changed entries records them as dirents (ino 0 is a whiteout that
// hides a lower entry). A directory created over a whiteout has no lower
// tree: it is opaque. File data written by the agent lives in 64 KiB
// blocks stored as chunks; unwritten ranges read through to the lower
// content (up to baseSize) or are holes.
//
// Durability. FUSE operations change the in-memory model and mark what they
// touched as dirty; one writer goroutine persists dirty state in batched
// transactions. Flush (close) and Fsync wait until everything before them
// is committed, so acknowledged data survives a crash of art, without one
// SQLite commit per write().
//
// Locking. ns guards the namespace (dirents, link counts, the inode table);
// each inode's mu guards its data and attributes. Reads and writes of file
// data take only the inode lock, so they run in parallel.
//
// Commit folds the upper layer into new trees along the changed paths only,
// writes the commit, clears the upper layer and advances the branch in one
// transaction.
package overlay
