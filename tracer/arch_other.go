//go:build linux && !amd64 && !arm64

package tracer

import "runtime"

// Architectures other than amd64 and arm64 have no syscall tables: the
// package compiles, Run and SeccompFilter return errors.

const (
	goarch          = runtime.GOARCH
	nativeAuditArch = 0
	x32Bit          = 0
	oLargefile      = 0
)

var personalities = []*personality{{name: ""}}
