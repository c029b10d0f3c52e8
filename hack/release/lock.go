package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// Package is one locked Debian package of one architecture.
type Package struct {
	Arch, Name, Version, SHA256 string
	// Filename is its path in the archive (pool/...).
	Filename string
}

const lockHeader = `# The Debian packages of strata's release image, per architecture: the
# roots (hack/release/lock.go) and all they depend on, each pinned by
# version and the SHA-256 of its file. Written by make release-lock; a
# release is built only from these files.
# arch	name	version	sha256	filename
`

// readLock reads a lock file.
func readLock(path string) ([]Package, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the package lock: %w; write it with make release-lock", err)
	}
	defer f.Close()
	var pkgs []Package
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 5 {
			return nil, fmt.Errorf("%s:%d: want arch, name, version, sha256 and filename separated by tabs", path, n)
		}
		pkgs = append(pkgs, Package{Arch: fields[0], Name: fields[1], Version: fields[2], SHA256: fields[3], Filename: fields[4]})
	}
	return pkgs, sc.Err()
}

// writeLock writes a lock file, sorted, so that a refresh that changes
// nothing changes no byte.
func writeLock(path string, pkgs []Package) error {
	sort.Slice(pkgs, func(i, j int) bool {
		if pkgs[i].Arch != pkgs[j].Arch {
			return pkgs[i].Arch < pkgs[j].Arch
		}
		return pkgs[i].Name < pkgs[j].Name
	})
	var b strings.Builder
	b.WriteString(lockHeader)
	for _, p := range pkgs {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", p.Arch, p.Name, p.Version, p.SHA256, p.Filename)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// refreshLock resolves the roots' closure for each architecture from the
// archive as it is now, and writes the lock.
func refreshLock(ctx context.Context, lockPath, stateDir string) error {
	var all []Package
	for _, arch := range Architectures {
		a := apt{arch: arch, dir: filepath.Join(stateDir, "apt", arch)}
		if err := a.update(ctx); err != nil {
			return err
		}
		names, err := a.closure(ctx, Roots)
		if err != nil {
			return err
		}
		pkgs, err := a.show(ctx, names)
		if err != nil {
			return err
		}
		for _, p := range pkgs {
			if p.SHA256 == "" || p.Filename == "" {
				return fmt.Errorf("apt-cache show %s (%s) gave no file and SHA-256", p.Name, arch)
			}
			// An Architecture: all package is locked under each release
			// architecture, which it is fetched for.
			p.Arch = arch
			all = append(all, p)
		}
	}
	return writeLock(lockPath, all)
}

// forArch is the lock's packages of one architecture.
func forArch(pkgs []Package, arch string) []Package {
	var out []Package
	for _, p := range pkgs {
		if p.Arch == arch {
			out = append(out, p)
		}
	}
	return out
}
