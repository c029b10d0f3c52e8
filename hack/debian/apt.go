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

// Show is what the sources hold of each package, given by name for its
// candidate version or as name=version: the version, its file in the
// archive and the file's SHA-256. A version the sources do not hold is
// left out.
func (a APT) Show(ctx context.Context, specs []string) ([]Package, error) {
	out, err := a.run(ctx, "apt-cache", append([]string{"show", "--no-all-versions"}, specs...)...)
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

// Fetch fetches one architecture's locked packages into dir and returns
// the packages it fetched and their .debs' paths by package name. Debian's
// security suite keeps only the newest version of a package, so a lock
// goes stale whenever a security update lands: then Fetch resolves the
// roots anew from the archive as it is now (apt checks every file against
// the archive's signed index), fetches those, and says on w which locked
// packages the archive no longer serves and how to refresh the lock
// (refresh, a command). The lock file itself is left as it is.
func (a APT) Fetch(ctx context.Context, locked []Package, roots []string, dir string, w io.Writer, refresh string) ([]Package, map[string]string, error) {
	if len(a.notFetched(locked, dir)) == 0 {
		paths, err := a.download(ctx, locked, dir)
		return locked, paths, err
	}
	// One read of the archive's lists serves the check, a new
	// resolution and the download.
	if err := a.Update(ctx); err != nil {
		return nil, nil, err
	}
	pkgs := locked
	stale, err := a.stale(ctx, locked)
	if err != nil {
		return nil, nil, err
	}
	if len(stale) > 0 {
		fmt.Fprintf(w, "the archive no longer serves %s (%s) at the locked version: building from the archive's current packages; refresh the lock with %s\n",
			strings.Join(stale, ", "), a.Arch, refresh)
		if pkgs, err = a.resolve(ctx, roots); err != nil {
			return nil, nil, err
		}
	}
	paths, err := a.download(ctx, pkgs, dir)
	return pkgs, paths, err
}

// stale is the locked packages the archive no longer serves at their
// locked version and SHA-256, as name=version, by the lists as last read.
func (a APT) stale(ctx context.Context, locked []Package) ([]string, error) {
	specs := make([]string, len(locked))
	for i, p := range locked {
		specs[i] = p.Name + "=" + p.Version
	}
	served, err := a.Show(ctx, specs)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, p := range served {
		have[p.SHA256] = true
	}
	var stale []string
	for _, p := range locked {
		if !have[p.SHA256] {
			stale = append(stale, p.Name+"="+p.Version)
		}
	}
	return stale, nil
}

// notFetched is the packages whose .deb is not in dir with its locked
// SHA-256.
func (a APT) notFetched(pkgs []Package, dir string) []Package {
	var missing []Package
	for _, p := range pkgs {
		if sum, err := FileSHA256(debPath(dir, p)); err != nil || sum != p.SHA256 {
			missing = append(missing, p)
		}
	}
	return missing
}

func debPath(dir string, p Package) string { return filepath.Join(dir, filepath.Base(p.Filename)) }

// Download fetches the packages into dir, in one apt-get run after
// reading the archive's lists, and checks each file's SHA-256 against the
// lock; it returns the .debs' paths by package name. Files already there
// with the locked SHA-256 are not fetched again, and then the archive is
// not read.
func (a APT) Download(ctx context.Context, pkgs []Package, dir string) (map[string]string, error) {
	if len(a.notFetched(pkgs, dir)) > 0 {
		if err := a.Update(ctx); err != nil {
			return nil, err
		}
	}
	return a.download(ctx, pkgs, dir)
}

// download is Download by the lists as last read.
func (a APT) download(ctx context.Context, pkgs []Package, dir string) (map[string]string, error) {
	paths := map[string]string{}
	for _, p := range pkgs {
		paths[p.Name] = debPath(dir, p)
	}
	missing := a.notFetched(pkgs, dir)
	if len(missing) == 0 {
		return paths, nil
	}
	bySum := map[string]Package{}
	var specs []string
	for _, p := range missing {
		bySum[p.SHA256] = p
		if strings.HasSuffix(p.Filename, "_all.deb") { // Architecture: all
			specs = append(specs, p.Name+"="+p.Version)
		} else {
			specs = append(specs, p.Name+":"+p.Arch+"="+p.Version)
		}
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
		return nil, fmt.Errorf("apt-get download (%s): %w: %s", a.Arch, err, strings.TrimSpace(string(out)))
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
