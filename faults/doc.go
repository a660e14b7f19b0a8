// Package faults is art's reliability campaign: fault-injection tests that
// drive the real art binary (built once per run) against real SQLite files,
// real FUSE mounts and real bwrap sandboxes, and check that nothing art
// acknowledged is ever lost.
//
//   - crash_test.go: kill -9 of art at seeded random points during push,
//     pull, commit, a write storm on art mount and an art run session; after
//     each kill, art fsck is clean, every commit art reported is intact and
//     every byte that was fsynced or closed is recovered by the next command,
//     and no stale mount remains.
//   - fulldisk_test.go: the repository on a size-limited tmpfs: ENOSPC inside
//     art mount and art run, recovery after freeing space, and a push larger
//     than the free space.
//   - concurrency_test.go: 8 art run sessions on 8 branches at once (untar,
//     edit, git commit inside) while art log, art diff and art status poll.
//   - corrupt_test.go: bytes flipped in stored chunks, trees and commits.
//   - badinput_test.go: torn and garbage journals, damaged repository files,
//     bad flags: clear errors, never a panic.
//   - fuzz_test.go: fuzzers for art run's --env, --allow and --memory input.
//   - soak_test.go: a long mixed workload (make soak), memory and fds flat.
//
// `go test ./faults/` runs a subset (every kind of fault, fewer kill
// points); ART_FAULTS=full runs the whole matrix (make faults). Every run
// prints its seed; ART_FAULTS_SEED=N replays the same kill points.
package faults
