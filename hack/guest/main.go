// Command guest builds the test guest: a Debian cloud kernel and an
// initramfs of pinned Debian packages (hack/guest/packages.lock) with the
// storage tools strata drives on a node, in which tests that need
// device-mapper or the kernel's NFS server run under qemu
// (internal/testing/guest).
//
//	go run ./hack/guest lock    refresh hack/guest/packages.lock
//	go run ./hack/guest build   build bin/guest/<lock digest>/ and print the folder
//	go run ./hack/guest shell   build it and boot it with a shell on this terminal
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/strata-gitops/strata/hack/debian"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "guest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("give a command: lock, build or shell")
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	lock := fl.String("lock", "hack/guest/packages.lock", "the package lock")
	out := fl.String("out", "bin/guest", "where guests are built, one folder per lock")
	disk := fl.String("disk", "", "shell: a sparse file of this size (such as 1G) the guest sees as /dev/vda")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "lock":
		pkgs, err := debian.APT{Arch: Arch, Dir: filepath.Join(*out, "cache", "apt", Arch)}.Resolve(ctx, Roots)
		if err != nil {
			return err
		}
		return debian.WriteLock(*lock, lockHeader, pkgs)
	case "build", "shell":
		dir, err := Build(ctx, *lock, *out)
		if err != nil {
			return err
		}
		if args[0] == "shell" {
			return shell(ctx, dir, *disk)
		}
		fmt.Println(dir)
		return nil
	}
	return fmt.Errorf("%q: the commands are lock, build and shell", args[0])
}
