// Package fuse adapts an overlay.FS to the kernel through go-fuse's node
// API: errno mapping, kernel cache settings, mount and unmount. It holds no
// filesystem logic of its own; every operation goes to the overlay by
// inode number, so the same safety argument covers every path.
//
// Caching: this mount is the only writer of its files, so entry and
// attribute timeouts are on and file pages are kept across opens
// (FOPEN_KEEP_CACHE); the kernel updates its own caches on the changes it
// sends us. Requests are served concurrently (over io_uring: one at a
// time per CPU, the CPUs in parallel); the overlay's locks, not a global
// one, order them. Each request recovers from a panic, logs it and
// returns EIO, so a bug never takes the mount down.
//
// Transport: as root, on Linux 6.14+ with FUSE over io_uring, requests
// arrive through one io_uring queue per CPU, each served by a thread
// pinned to that CPU (ring.go): a round trip then never crosses CPUs,
// which on a VM costs two inter-processor interrupts (9 µs instead of
// 48 µs a round trip here). Requests the ring does not carry (FORGET,
// INTERRUPT) and notifications use /dev/fuse through go-fuse's own
// server, which also serves everything where io_uring is unavailable.
// ART_FUSE_TRANSPORT=classic forces /dev/fuse alone. An INTERRUPT of a
// request the ring carries reaches go-fuse's server, which does not know
// the request and lets it run to its end; art's handlers never wait on
// anything an interrupt could cut short.
//
// Deadlocks: art serves the mount from the same process that starts the
// sandbox; the agent's processes run on the mount but never inside the
// server, so a blocked request cannot block the server itself. A ring
// thread answers a request inline, except fsync and setxattr (which may
// wait on the disk or send the kernel a notification): those run on a
// goroutine, so they never hold up the other requests of their CPU.
// Tests that use the mount from the serving process rely on the kernel
// knowing the mount does not poll (pollHack in server.go).
package fuse
