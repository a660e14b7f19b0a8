// Package repo is the art repository: one SQLite file holding the object
// store, refs and HEAD, worktrees and the host sync state. It opens and
// migrates the file, parses revisions, and implements push, pull, diff,
// log, gc and fsck. It knows nothing about FUSE or the sandbox; the overlay
// builds on its object store and worktree tables.
package repo
