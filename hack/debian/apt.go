// Package debian locks, fetches and unpacks Debian packages: a lock file
// pins each package of a set by version and SHA-256, apt (with a state of
// its own) resolves and downloads them, and a Rootfs holds their files as
// dpkg would unpack them. The release's images (hack/release) and the
// test guest (hack/guest) are both built from locks this way.
package debian

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// APT runs apt-get and apt-cache for one architecture with a state of its
// own under Dir: the host's sources, but none of its installed packages
// and none of its configured architectures, so nothing of the host's apt
// state changes and any architecture Debian builds can be locked.
type APT struct {
	Arch, Dir string
}

func (a APT) options() []string {
	return []string{"-q", "-o", "APT::Architecture=" + a.Arch, "-o", "APT::Architectures::=" + a.Arch,
		"-o", "Dir::State::Lists=" + filepath.Join(a.Dir, "lists"), "-o", "Dir::Cache=" + filepath.Join(a.Dir, "cache"),
		"-o", "Dir::State::status=/dev/null"}
}

func (a APT) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, tool, append(a.options(), args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s (%s): %w: %s", tool, strings.Join(args, " "), a.Arch, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Update reads the sources' package lists for the architecture.
func (a APT) Update(ctx context.Context) error {
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(a.Dir, d), 0o755); err != nil {
			return err
		}
	}
	_, err := a.run(ctx, "apt-get", "update")
	return err
}

// Closure is the roots and every package they depend on, pre-depend on
// included, recommendations and suggestions left out, sorted.
func (a APT) Closure(ctx context.Context, roots []string) ([]string, error) {
	out, err := a.run(ctx, "apt-cache", append([]string{"depends", "--recurse", "--no-recommends", "--no-suggests",
		"--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"}, roots...)...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// Indented lines are dependency fields; <name> is a virtual
		// package, provided by one of the real ones listed.
		if line == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "<") {
			continue
		}
		seen[strings.TrimSuffix(line, ":"+a.Arch)] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Show is what the sources hold of each package: the candidate version,
// its file in the archive and the file's SHA-256.
func (a APT) Show(ctx context.Context, names []string) ([]Package, error) {
	out, err := a.run(ctx, "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return nil, err
	}
	var pkgs []Package
	for _, stanza := range strings.Split(string(out), "\n\n") {
		p := Package{}
		sc := bufio.NewScanner(strings.NewReader(stanza))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			key, value, ok := strings.Cut(sc.Text(), ": ")
			if !ok {
				continue
			}
			switch key {
			case "Package":
				p.Name = value
			case "Version":
				p.Version = value
			case "Architecture":
				p.Arch = value
			case "SHA256":
				p.SHA256 = value
			case "Filename":
				p.Filename = value
			}
		}
		if p.Name != "" {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// Download fetches the locked packages into dir, in one apt-get run, and
// checks each file's SHA-256 against the lock; it returns the .debs'
// paths by package name. Files already there with the locked SHA-256 are
// not fetched again.
func (a APT) Download(ctx context.Context, pkgs []Package, dir string) (map[string]string, error) {
	paths := map[string]string{}
	bySum := map[string]Package{}
	var specs []string
	for _, p := range pkgs {
		path := filepath.Join(dir, filepath.Base(p.Filename))
		paths[p.Name] = path
		if sum, err := FileSHA256(path); err == nil && sum == p.SHA256 {
			continue
		}
		bySum[p.SHA256] = p
		if strings.HasSuffix(p.Filename, "_all.deb") { // Architecture: all
			specs = append(specs, p.Name+"="+p.Version)
		} else {
			specs = append(specs, p.Name+":"+p.Arch+"="+p.Version)
		}
	}
	if len(specs) == 0 {
		return paths, nil
	}
	if err := a.Update(ctx); err != nil {
		return nil, err
	}
	// apt names a file after the version with its epoch escaped
	// (name_2%3a1.0_arch.deb); each is kept under the archive's name,
	// found by its SHA-256.
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "apt-get", append(a.options(), append([]string{"download"}, specs...)...)...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apt-get download (%s): %w: %s; if the archive no longer has a locked version, refresh the lock",
			a.Arch, err, strings.TrimSpace(string(out)))
	}
	got, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil {
		return nil, err
	}
	for _, f := range got {
		sum, err := FileSHA256(f)
		if err != nil {
			return nil, err
		}
		p, ok := bySum[sum]
		if !ok {
			return nil, fmt.Errorf("%s: SHA-256 %s is no locked package's: the archive served another file than the one locked", filepath.Base(f), sum)
		}
		if err := os.Rename(f, paths[p.Name]); err != nil {
			return nil, err
		}
		delete(bySum, sum)
	}
	for _, p := range bySum {
		return nil, fmt.Errorf("%s %s (%s): not fetched with its locked SHA-256 %s", p.Name, p.Version, a.Arch, p.SHA256)
	}
	return paths, nil
}

// FileSHA256 is the hex SHA-256 of a file's bytes.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
