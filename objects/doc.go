// Package objects defines art's content-addressed object model and its
// canonical encodings: BLAKE3-256 ids, content-defined chunking of file
// data, Merkle trees and commits. It is pure: it knows nothing about SQLite,
// FUSE or the sandbox. Storage lives behind the narrow Loader interface,
// which the repository implements.
//
// Every decoder here is strict: input that is not in canonical form (entries
// out of order, duplicated names, non-minimal varints, trailing bytes,
// unknown fields) is rejected, because ids are hashes of the encoding and two
// encodings of one value would break deduplication and diff-by-id.
// docs/format.md is the reference for every encoding in this package.
package objects
