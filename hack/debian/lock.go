package debian

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Package is one locked Debian package of one architecture.
type Package struct {
	Arch, Name, Version, SHA256 string
	// Filename is its path in the archive (pool/...).
	Filename string
}

// ReadLock reads a lock file: a line per package, its architecture, name,
// version, SHA-256 and file separated by tabs; # starts a comment.
func ReadLock(path string) ([]Package, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the package lock: %w", err)
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

// WriteLock writes a lock file under its header (comment lines), sorted,
// so that a refresh that changes nothing changes no byte.
func WriteLock(path, header string, pkgs []Package) error {
	sort.Slice(pkgs, func(i, j int) bool {
		if pkgs[i].Arch != pkgs[j].Arch {
			return pkgs[i].Arch < pkgs[j].Arch
		}
		return pkgs[i].Name < pkgs[j].Name
	})
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# arch\tname\tversion\tsha256\tfilename\n")
	for _, p := range pkgs {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", p.Arch, p.Name, p.Version, p.SHA256, p.Filename)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Resolve is the roots' closure from the archive as it is now, each
// package with its file and SHA-256. An Architecture: all package is
// given the architecture it is fetched for.
func (a APT) Resolve(ctx context.Context, roots []string) ([]Package, error) {
	if err := a.Update(ctx); err != nil {
		return nil, err
	}
	return a.resolve(ctx, roots)
}

// resolve is Resolve by the lists as last read.
func (a APT) resolve(ctx context.Context, roots []string) ([]Package, error) {
	names, err := a.Closure(ctx, roots)
	if err != nil {
		return nil, err
	}
	pkgs, err := a.Show(ctx, names)
	if err != nil {
		return nil, err
	}
	for i, p := range pkgs {
		if p.SHA256 == "" || p.Filename == "" {
			return nil, fmt.Errorf("apt-cache show %s (%s) gave no file and SHA-256", p.Name, a.Arch)
		}
		pkgs[i].Arch = a.Arch
	}
	return pkgs, nil
}

// ForArch is the lock's packages of one architecture.
func ForArch(pkgs []Package, arch string) []Package {
	var out []Package
	for _, p := range pkgs {
		if p.Arch == arch {
			out = append(out, p)
		}
	}
	return out
}
