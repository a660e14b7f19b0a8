//go:build linux && amd64

package tracer

import "golang.org/x/sys/unix"

const (
	goarch          = "amd64"
	nativeAuditArch = unix.AUDIT_ARCH_X86_64
	// x32Bit is __X32_SYSCALL_BIT: x32 syscalls use the x86_64 audit arch
	// and numbers with this bit set.
	x32Bit = 0x40000000
)

var personalities = []*personality{
	{name: "", auditArch: unix.AUDIT_ARCH_X86_64, names: sysnamesAMD64[:]},
	{name: "x32", auditArch: unix.AUDIT_ARCH_X86_64, nrBase: x32Bit, names: sysnamesX32[:]},
	{name: "i386", auditArch: unix.AUDIT_ARCH_I386, names: sysnamesI386[:]},
}

// oLargefile is the kernel's O_LARGEFILE for this architecture (x/sys
// reports 0 on 64-bit, but 32-bit tracees pass the real bit).
const oLargefile = 0x8000
