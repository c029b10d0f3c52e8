package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/strata-gitops/strata/hack/debian"
	"github.com/strata-gitops/strata/internal/buildflags"
)

// component is one image of the release, built for every architecture:
// one Go program, on the locked Debian packages or on nothing.
type component struct {
	// name is the image's repository under the registry's prefix.
	name string
	// tag is the release's version, or the upstream version of a
	// program strata builds but does not write (the CSI sidecars).
	tag string
	// chartValue is the csiSidecars value of charts/strata that runs
	// it; "" when the chart names it otherwise or not at all.
	chartValue string
	// onDebian puts it on the locked Debian packages.
	onDebian bool
	// binary is where the program is in the image, its entrypoint.
	binary string
	// build builds the program for an architecture.
	build func(ctx context.Context, o Options, arch string) ([]byte, error)
	// extra adds files besides the program.
	extra func(fs debian.Rootfs)
}

// strataTools are the programs strata's agent, CSI node service and
// image jobs run, which its image must hold on its PATH.
var strataTools = []string{
	"lvm", "losetup", "wipefs", "blkid", "lsblk", "mount", "umount", "findmnt", "fsfreeze", "lsattr",
	"mkfs.ext4", "mke2fs", "resize2fs", "e2fsck", "fsck", "fsck.ext4",
	"mkfs.xfs", "xfs_growfs", "xfs_repair", "btrfs", "mkfs.btrfs", "sh", "cp", "truncate",
	"blockdev", "qemu-img", "mount.nfs",
}

// components are the release's images: strata and strata-node; the CSI sidecars and the
// snapshot controller the chart runs (hack/sidecars.txt); the example
// app the docs and the end-to-end suite run; and the pods' sandbox image
// the local cluster's nodes run. One registry serves a whole cluster.
func components(o Options) ([]component, error) {
	out := []component{
		{name: "strata", tag: o.Version, onDebian: true, binary: "/usr/local/bin/strata", build: goProgram("./cmd/strata", true)},
		// What every node pulls: the agent, the CSI driver, the image
		// jobs' client, without the controller's libraries.
		{name: "strata-node", tag: o.Version, onDebian: true, binary: "/usr/local/bin/strata-node", build: goProgram("./cmd/strata-node", true)},
		{name: "example-app", tag: o.Version, binary: "/example-app", build: goProgram("./cmd/example-app", false),
			// Buildbarn's volume-init runs a shell: the example app
			// stands in for it (cmd/example-app/buildbarn.go).
			extra: func(fs debian.Rootfs) { fs.Dir("bin", 0o755); fs.Link("bin/sh", "/example-app"); fs.Dir("tmp", 0o1777) }},
		{name: "pause", tag: o.Version, binary: "/pause", build: goProgram("./cmd/pause", false)},
	}
	sidecars, err := readSidecars(filepath.Join(o.Repo, "hack", "sidecars.txt"))
	if err != nil {
		return nil, err
	}
	return append(out, sidecars...), nil
}

// readSidecars reads hack/sidecars.txt: NAME MODULE VERSION CHART-VALUE.
func readSidecars(file string) ([]component, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []component
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s:%d: want NAME MODULE VERSION CHART-VALUE", file, line)
		}
		out = append(out, component{name: fields[0], tag: fields[2], chartValue: fields[3], binary: "/" + fields[0], build: sidecar(fields[0])})
	}
	return out, s.Err()
}

// goProgram builds a package of this module for an architecture: static,
// without paths of this machine, so that one commit gives one binary.
// version sets main.version to the release's.
func goProgram(pkg string, version bool) func(context.Context, Options, string) ([]byte, error) {
	return func(ctx context.Context, o Options, arch string) ([]byte, error) {
		out := filepath.Join(o.Cache, "bin", arch, path.Base(pkg))
		ldflags := "-s -w -buildid="
		if version {
			ldflags += " -X main.version=" + o.Version
		}
		flags, err := buildflags.Read(o.Repo)
		if err != nil {
			return nil, err
		}
		args := append(append([]string{"build"}, flags...), "-ldflags", ldflags, "-o", out, pkg)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = o.Repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=readonly")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s for %s: %w: %s", pkg, arch, err, strings.TrimSpace(string(b)))
		}
		return os.ReadFile(out)
	}
}

// sidecar builds a CSI sidecar with hack/sidecars.sh, once per
// architecture: the script keeps what it built under bin/sidecars.
func sidecar(name string) func(context.Context, Options, string) ([]byte, error) {
	return func(ctx context.Context, o Options, arch string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(o.Repo, "hack", "sidecars.sh"), arch)
		cmd.Dir = o.Repo
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the CSI sidecars for %s: %w: %s", arch, err, strings.TrimSpace(string(b)))
		}
		return os.ReadFile(filepath.Join(o.Repo, "bin", "sidecars", arch, name))
	}
}
