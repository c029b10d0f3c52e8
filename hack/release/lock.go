package main

import (
	"context"
	"path/filepath"

	"github.com/strata-gitops/strata/hack/debian"
)

// Architectures are the platforms a release is built for.
var Architectures = []string{"amd64", "arm64"}

// Roots are the Debian packages the image holds for the tools the agent
// and the CSI node service drive, and qemu-img for the image jobs; the
// lock holds them and everything they depend on.
var Roots = []string{"lvm2", "btrfs-progs", "e2fsprogs", "xfsprogs", "util-linux", "mount", "nfs-common", "qemu-utils", "ca-certificates",
	// Essential in Debian, so no package depends on them: cp and truncate
	// (the loopback volume manager), sh.
	"coreutils", "dash"}

const lockHeader = `# The Debian packages of strata's release image, per architecture: the
# roots (hack/release/lock.go) and all they depend on, each pinned by
# version and the SHA-256 of its file. Written by make release-lock; a
# release is built only from these files.
`

// refreshLock resolves the roots' closure for each architecture from the
// archive as it is now, and writes the lock.
func refreshLock(ctx context.Context, lockPath, stateDir string) error {
	var all []debian.Package
	for _, arch := range Architectures {
		pkgs, err := debian.APT{Arch: arch, Dir: filepath.Join(stateDir, "apt", arch)}.Resolve(ctx, Roots)
		if err != nil {
			return err
		}
		all = append(all, pkgs...)
	}
	return debian.WriteLock(lockPath, lockHeader, all)
}
