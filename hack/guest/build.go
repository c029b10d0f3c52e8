package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/strata-gitops/strata/hack/debian"
)

// Build builds the guest of the lock into a folder of out named for the
// lock's digest, unless it is there, and returns the folder: the kernel
// (vmlinuz) and the initramfs (initrd.cpio, uncompressed, which a
// software-emulated guest unpacks faster than it would inflate it).
func Build(ctx context.Context, lock, out string) (string, error) {
	sum, err := digest(lock)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(out, sum[:16])
	if _, err := os.Stat(filepath.Join(dir, "initrd.cpio")); err == nil {
		return dir, nil
	}
	pkgs, err := debian.ReadLock(lock)
	if err != nil {
		return "", err
	}
	fs, pkgs, err := unpack(ctx, pkgs, filepath.Join(out, "cache"))
	if err != nil {
		return "", err
	}
	kernel, err := takeKernel(fs)
	if err != nil {
		return "", err
	}
	if err := configure(fs); err != nil {
		return "", err
	}
	var initrd bytes.Buffer
	if err := fs.Cpio(&initrd); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(out, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "vmlinuz"), kernel, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "initrd.cpio"), initrd.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := debian.WriteLock(filepath.Join(tmp, "packages.lock"), builtFromHeader, pkgs); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		return "", err
	}
	return dir, nil
}

// digest is what a guest is built from: the lock and the files of the
// folder it is in (this builder's sources, its init). A change to any of
// them builds a guest anew.
func digest(lock string) (string, error) {
	h := sha256.New()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(lock), "*"))
	if err != nil {
		return "", err
	}
	if !slices.Contains(files, lock) {
		files = append([]string{lock}, files...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("the guest's sources: %w; write the lock with go run ./hack/guest lock", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// notAtRunTime are locked packages the guest never runs: what a kernel
// package depends on to build an initramfs, and the languages of scripts
// no test calls. They stay in the lock, since apt resolves them.
var notAtRunTime = regexp.MustCompile(`^(dracut.*|initramfs-tools.*|tiny-initramfs.*|klibc-utils|libklibc|perl.*|libperl.*|python3.*|libpython3.*|libicu72|usrmerge|udev|dpkg|install-info|cdebconf|debconf|libdebian-installer4)$`)

// builtFromHeader heads the list of packages a guest was built from,
// which differs from the lock when the archive had moved on from it.
const builtFromHeader = `# The Debian packages this guest was built from (go run ./hack/guest build).
`

// unpack fetches the locked packages (or, when the archive no longer
// serves them, its current ones) and unpacks those the guest runs; it
// returns the packages fetched.
func unpack(ctx context.Context, locked []debian.Package, cache string) (debian.Rootfs, []debian.Package, error) {
	debs := filepath.Join(cache, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, nil, err
	}
	a := debian.APT{Arch: Arch, Dir: filepath.Join(cache, "apt", Arch)}
	pkgs, paths, err := a.Fetch(ctx, locked, Roots, debs, os.Stderr, "go run ./hack/guest lock")
	if err != nil {
		return nil, nil, err
	}
	fs := debian.Rootfs{}
	for _, p := range pkgs {
		if notAtRunTime.MatchString(p.Name) {
			continue
		}
		if err := fs.Unpack(ctx, paths[p.Name]); err != nil {
			return nil, nil, err
		}
	}
	return fs, pkgs, nil
}

// takeKernel removes the kernel image from the tree and returns it, and
// keeps of the kernel's modules only those the guest loads and what they
// need.
func takeKernel(fs debian.Rootfs) ([]byte, error) {
	var kernel []byte
	var version string
	for name, e := range fs {
		if v, ok := strings.CutPrefix(name, "boot/vmlinuz-"); ok {
			kernel, version = e.Data(), v
		}
	}
	if kernel == nil {
		return nil, fmt.Errorf("no package of the lock holds a kernel (boot/vmlinuz-*)")
	}
	for name := range fs {
		if strings.HasPrefix(name, "boot/") {
			delete(fs, name)
		}
	}
	return kernel, pruneModules(fs, "lib/modules/"+version)
}

// Modules are the kernel modules the guest's init loads.
var Modules = []string{"virtio_pci", "virtio_blk", "virtio_net", "loop", "dm_mod", "dm_snapshot", "dm_thin_pool",
	"btrfs", "xfs", "nfsd", "nfsv3", "nfsv4"}

// pruneModules removes every module but Modules and those they depend on,
// so that the initramfs stays small, and writes etc/guest/modules: their
// files in an order insmod can load them in, each after what it needs.
// (modules.dep is made by depmod when a kernel is installed; the guest has
// none, so each module's own list is read.)
func pruneModules(fs debian.Rootfs, root string) error {
	byName := map[string]string{}
	for name := range fs {
		if strings.HasPrefix(name, root+"/kernel/") && strings.HasSuffix(name, ".ko") {
			byName[moduleName(name)] = name
		}
	}
	var order []string
	seen := map[string]bool{}
	var load func(module string) error
	load = func(module string) error {
		file, ok := byName[module]
		if !ok {
			return fmt.Errorf("kernel module %s is not under %s", module, root)
		}
		if seen[file] {
			return nil
		}
		seen[file] = true
		for _, d := range dependsOf(fs[file].Data()) {
			if err := load(d); err != nil {
				return fmt.Errorf("%s needs %w", module, err)
			}
		}
		order = append(order, "/"+file)
		return nil
	}
	for _, m := range Modules {
		if err := load(m); err != nil {
			return err
		}
	}
	for _, file := range byName {
		if !seen[file] {
			delete(fs, file)
		}
	}
	fs.Put("etc/guest/modules", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	return nil
}

// dependsOf reads a module's "depends=" entry of its .modinfo section.
func dependsOf(ko []byte) []string {
	_, rest, ok := bytes.Cut(ko, []byte("\x00depends="))
	if !ok {
		return nil
	}
	list, _, _ := bytes.Cut(rest, []byte{0})
	var out []string
	for _, d := range strings.Split(string(list), ",") {
		if d != "" {
			out = append(out, strings.ReplaceAll(d, "-", "_"))
		}
	}
	return out
}

// moduleName is a module file's name as modprobe takes it.
func moduleName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(path.Base(file), ".ko"), "-", "_")
}
