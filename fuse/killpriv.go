package fuse

import (
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/artproject/art/overlay"
)

// killPrivFS clears set-user-ID and set-group-ID bits where a local disk
// would, which the mount promises the kernel by negotiating
// FUSE_HANDLE_KILLPRIV_V2 (in return, the kernel stops asking for
// security.capability before each write). Setattr handles truncate, chown
// and fallocate (Node.Setattr); writes are handled here because go-fuse's
// node API does not pass the write flags on.
type killPrivFS struct {
	gofuse.RawFileSystem
	srv *gofuse.Server
}

func (k *killPrivFS) Init(s *gofuse.Server) {
	k.srv = s
	k.RawFileSystem.Init(s)
}

func (k *killPrivFS) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		k.killSetID(cancel, &in.InHeader)
	}
	return k.RawFileSystem.Write(cancel, in, data)
}

func (k *killPrivFS) Writev(cancel <-chan struct{}, in *gofuse.WriteIn, data [][]byte) (uint32, gofuse.Status) {
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		k.killSetID(cancel, &in.InHeader)
	}
	return k.RawFileSystem.Writev(cancel, in, data)
}

// killSetID clears the set-ID bits of the request's node, when it has any
// to clear, and drops the kernel's cached attributes, which still show
// them (the kernels seen here refetch them after a write anyway; the
// protocol does not promise it). A failure is left to the request itself,
// which meets the same node.
func (k *killPrivFS) killSetID(cancel <-chan struct{}, h *gofuse.InHeader) {
	var out gofuse.AttrOut
	if k.RawFileSystem.GetAttr(cancel, &gofuse.GetAttrIn{InHeader: *h}, &out) != gofuse.OK {
		return
	}
	if _, kill := overlay.KillSetID(out.Mode & 0o7777); !kill || out.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	in := &gofuse.SetAttrIn{SetAttrInCommon: gofuse.SetAttrInCommon{InHeader: *h, Valid: gofuse.FATTR_KILL_SUIDGID}}
	if k.RawFileSystem.SetAttr(cancel, in, &out) == gofuse.OK {
		k.srv.InodeNotify(h.NodeId, -1, 0)
	}
}
