package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/strata-gitops/strata/hack/debian"
)

// notable are the packages whose versions the notes name: the tools
// strata drives.
var notable = []string{"lvm2", "btrfs-progs", "e2fsprogs", "xfsprogs", "util-linux", "nfs-common", "qemu-utils"}

// writeNotes writes RELEASE_NOTES.md: the versions of what the release
// holds, what changed since the previous tag, and how to upgrade.
func writeNotes(o Options, built []builtComponent, pkgs []debian.Package) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# strata %s\n\n", o.Version)
	fmt.Fprintf(&b, "Built from commit %s of %s.\n\n", commitOf(o.Repo), o.Epoch.Format(time.DateOnly))
	archs, err := o.architectures()
	if err != nil {
		return err
	}
	b.WriteString("## What it holds\n\n| component | version |\n|---|---|\n")
	fmt.Fprintf(&b, "| chart `strata` | %s, appVersion %s |\n", o.Version, o.Version)
	for _, c := range built {
		fmt.Fprintf(&b, "| image `%s:%s` (%s) | `%s` |\n", c.name, c.tag, strings.Join(archs, ", "), c.digest)
	}
	if info, err := buildinfo.Read(bytes.NewReader(built[0].amd64)); err == nil {
		fmt.Fprintf(&b, "| strata, built with | %s |\n", info.GoVersion)
	}
	amd64 := debian.ForArch(pkgs, "amd64")
	for _, name := range notable {
		for _, p := range amd64 {
			if p.Name == name {
				fmt.Fprintf(&b, "| %s (Debian) | %s |\n", p.Name, p.Version)
			}
		}
	}
	fmt.Fprintf(&b, "\nEvery Debian package of each image is in hack/release/packages.lock (%d per architecture) and in the image's SBOM.\n\n", len(amd64))
	b.WriteString(sizesSection(built))
	b.WriteString("## What changed\n\n")
	b.WriteString(changes(o.Repo))
	b.WriteString("\n## Upgrading\n\nVerify the release first (`make verify-release VERSION=" + o.Version + "`, or `cosign verify --key cosign.pub` once it is in a registry).\n" +
		"Then follow docs/install.md, \"Upgrading\": the CRDs first, which Helm does not upgrade, then `helm upgrade` to this chart.\n")
	return os.WriteFile(filepath.Join(o.Out, "RELEASE_NOTES.md"), []byte(b.String()), 0o644)
}

func commitOf(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "(unknown)"
	}
	return strings.TrimSpace(string(out))
}

// changes lists the commits since the previous tag, or says there is none.
func changes(repo string) string {
	out, err := exec.Command("git", "-C", repo, "describe", "--tags", "--abbrev=0", "HEAD^").Output()
	if err != nil {
		return "The first release: there is no previous tag.\n"
	}
	prev := strings.TrimSpace(string(out))
	log, err := exec.Command("git", "-C", repo, "log", "--format=- %s (%h)", prev+"..HEAD").Output()
	if err != nil {
		return fmt.Sprintf("The commits since %s could not be read: %v\n", prev, err)
	}
	return fmt.Sprintf("Since %s:\n\n%s", prev, log)
}

// writeSums writes SHA256SUMS: each file of the release but the sums.
func writeSums(out string) error {
	var lines []string
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(out, path)
		if err != nil || rel == "SHA256SUMS" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][66:] < lines[j][66:] })
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
