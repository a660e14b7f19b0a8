//go:build linux && arm64

package tracer

import "golang.org/x/sys/unix"

const (
	goarch          = "arm64"
	nativeAuditArch = unix.AUDIT_ARCH_AARCH64
	x32Bit          = 0 // no x32-like ABI on arm64
)

var personalities = []*personality{
	{name: "", auditArch: unix.AUDIT_ARCH_AARCH64, names: sysnamesARM64[:]},
	{name: "arm", auditArch: unix.AUDIT_ARCH_ARM, names: sysnamesARM[:]},
}

// oLargefile is the kernel's O_LARGEFILE for this architecture (x/sys
// reports 0 on 64-bit, but 32-bit tracees pass the real bit).
const oLargefile = 0x20000
