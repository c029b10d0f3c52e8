package guest

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-gitops/strata/hack/debian"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// image is the folder of the guest's kernel and initramfs, built from
// hack/guest/packages.lock into bin/guest the first time (a few seconds;
// the packages' files are kept) and again only when the lock or the
// builder changes.
func image(t *testing.T) string {
	t.Helper()
	return onceOrFatal(t, buildImage)
}

var buildImage = sync.OnceValues(func() (string, error) {
	root := testenv.RepoRoot()
	cmd := exec.Command("go", "run", "./hack/guest", "build", "-out", filepath.Join(root, "bin", "guest"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the guest (go run ./hack/guest build): %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

// testBinary is the test binary of the package under test, built static
// (the guest has no Go toolchain, and only Debian's libraries) into
// bin/guest/tests.
func testBinary(t *testing.T) string {
	t.Helper()
	return onceOrFatal(t, buildTestBinary)
}

var buildTestBinary = sync.OnceValues(func() (string, error) {
	rel, err := packageDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(testenv.RepoRoot(), "bin", "guest", "tests", strings.ReplaceAll(rel, "/", "-")+".test")
	cmd := exec.Command("go", "test", "-c", "-o", path, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go test -c for the guest: %w: %s", err, out)
	}
	return path, nil
})

// onceOrFatal is what a build done once per test process made, or the
// test's end if it failed.
func onceOrFatal(t *testing.T, build func() (string, error)) string {
	t.Helper()
	path, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// packageDir is the package under test's folder, from the repository's
// root: go test runs a package's tests in its folder.
func packageDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Rel(testenv.RepoRoot(), wd)
}

// initrdFor is the guest's initramfs with the test added: a second cpio
// archive after the guest's own (the kernel unpacks one after the other)
// holding the test binary, /guest/run, which runs it, and the
// repository's files the test reads.
func initrdFor(img, dir, bin string, o Options, extra map[string][]byte) (string, error) {
	rel, err := packageDir()
	if err != nil {
		return "", err
	}
	files := debian.Rootfs{}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	files.Put("guest/test", 0o755, data)
	files.Put("guest/run", 0o755, []byte(runScript(rel, o)))
	files.Dir(strings.TrimPrefix(repoInGuest, "/")+"/"+rel, 0o755)
	for name, data := range extra {
		files.Put(name, 0o600, data)
	}
	root := testenv.RepoRoot()
	for _, f := range append([]string{"go.mod"}, o.Files...) {
		if err := addTree(files, root, f); err != nil {
			return "", err
		}
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	out, err := os.Create(initrd)
	if err != nil {
		return "", err
	}
	defer out.Close()
	if err := copyFile(out, filepath.Join(img, "initrd.cpio")); err != nil {
		return "", err
	}
	if err := files.Cpio(out); err != nil {
		return "", err
	}
	return initrd, out.Close()
}

// runScript runs the tests in their package's folder of the repository's
// copy, in the guest, verbose, so that their results can be read back.
func runScript(rel string, o Options) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "cd %s/%s || exit 125\n", repoInGuest, rel)
	env := append([]string{inGuestVar + "=1", "CI=" + os.Getenv("CI")}, o.Env...)
	for _, e := range env {
		fmt.Fprintf(&b, "export %s\n", shellQuote(e))
	}
	fmt.Fprintf(&b, "exec /guest/test -test.v -test.run %s -test.timeout %s\n",
		shellQuote(o.Run), o.Timeout)
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// addTree adds a file or folder of the repository under /repo.
func addTree(files debian.Rootfs, root, rel string) error {
	return filepath.WalkDir(filepath.Join(root, rel), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("a file the guest's test reads: %w", err)
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(root, path)
		files.Put(strings.TrimPrefix(repoInGuest, "/")+"/"+name, int64(info.Mode().Perm()), data)
		return nil
	})
}

// copyFile appends a file's bytes to w.
func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
