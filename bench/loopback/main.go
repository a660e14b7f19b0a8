// Command loopback serves a directory through go-fuse's own loopback
// filesystem. bench/overlay.sh runs it next to art mount to show what any
// go-fuse filesystem costs on the machine, apart from art's own work.
package main

import (
	"os"
	"os/signal"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	root, _ := fs.NewLoopbackRoot(os.Args[1])
	srv, err := fs.Mount(os.Args[2], root, &fs.Options{MountOptions: fuse.MountOptions{AllowOther: true, DirectMount: true, MaxWrite: 1 << 20}})
	if err != nil {
		panic(err)
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	go func() { <-c; srv.Unmount() }()
	srv.Wait()
}
