// Package fuse adapts an overlay.FS to the kernel through go-fuse's node
// API: errno mapping, kernel cache settings, mount and unmount. It holds no
// filesystem logic of its own; every operation goes to the overlay by
// inode number, so the same safety argument covers every path.
//
// Caching: this mount is the only writer of its files, so entry and
// attribute timeouts are on and file pages are kept across opens
// (FOPEN_KEEP_CACHE); the kernel updates its own caches on the changes it
// sends us. Requests are served concurrently; the overlay's locks, not a
// global one, order them. Each request recovers from a panic, logs it and
// returns EIO, so a bug never takes the mount down.
//
// Deadlocks: art serves the mount from the same process that starts the
// sandbox; the agent's processes run on the mount but never inside the
// server, so a blocked request cannot block the server itself.
package fuse
