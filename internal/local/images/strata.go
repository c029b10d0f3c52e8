package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
)

// StrataRef is strata's own image on the local cluster.
const StrataRef = "strata.local/strata:local"

// StrataTools are the programs strata's agent and CSI node service run,
// copied into its image from this machine with the libraries they load.
var StrataTools = []string{
	"lvm", "losetup", "wipefs", "blkid", "lsblk", "mount", "umount", "findmnt", "fsfreeze", "lsattr",
	"mkfs.ext4", "mke2fs", "resize2fs", "e2fsck", "fsck", "fsck.ext4",
	"mkfs.xfs", "xfs_growfs", "xfs_repair", "btrfs", "mkfs.btrfs", "sh", "cp", "truncate",
	"blockdev", // mount-utils asks it a device's size and read-only bit before growing a filesystem
	"qemu-img", // the image populator's pods convert images (strata image fill)
}

// toolConfig are configuration files the tools read, where this machine
// has them.
var toolConfig = []string{"/etc/mke2fs.conf", "/etc/lvm/lvm.conf", "/etc/e2scrub.conf"}

// Strata is strata's image: the binary at /strata, and the tools with
// their libraries at the paths they have here.
func Strata(strataBinary string) (Image, error) {
	img := Image{Ref: StrataRef, Entrypoint: []string{"/strata"},
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Files: []File{{Path: "/strata", Source: strataBinary, Mode: 0o755}, {Path: "/tmp/.keep"}, {Path: "/run/lock/.keep"}}}
	programs := []string{strataBinary}
	for _, tool := range StrataTools {
		path, err := exec.LookPath(tool)
		if err != nil {
			return img, fmt.Errorf("%s, which strata's image holds, is not installed: run hack/packages.sh", tool)
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return img, err
		}
		img.Files = append(img.Files, File{Path: real, Source: real})
		if real != path {
			img.Files = append(img.Files, File{Path: path, Link: real})
		}
		programs = append(programs, real)
	}
	for _, lib := range librariesOf(programs...) {
		img.Files = append(img.Files, File{Path: lib, Source: lib})
	}
	for _, conf := range toolConfig {
		if _, err := os.Stat(conf); err == nil {
			img.Files = append(img.Files, File{Path: conf, Source: conf})
		}
	}
	return img, nil
}

// lddLine finds the library paths in ldd's output: "name => /path (addr)"
// and the loader's "/path (addr)".
var lddLine = regexp.MustCompile(`(?m)(?:=> |^\s+)(/[^ ]+) \(0x`)

// librariesOf are the shared libraries the programs load, by ldd.
func librariesOf(programs ...string) []string {
	seen := map[string]bool{}
	for _, p := range programs {
		out, err := exec.Command("ldd", p).CombinedOutput()
		if err != nil {
			continue // a static program: ldd says so and fails
		}
		for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
			seen[m[1]] = true
		}
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs
}
