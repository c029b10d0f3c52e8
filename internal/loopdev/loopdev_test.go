package loopdev_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A loop device keeps a read-only flag set on it (a fence) after it is
// detached; Attach clears it, or the next file on that device would
// refuse every write.
func TestAttachClearsAReadOnlyFlagLeftOnTheDevice(t *testing.T) {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "losetup")
	file := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dev, err := loopdev.Attach(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopdev.DetachUnder(filepath.Dir(file)) })
	if err := setReadOnly(dev, 1); err != nil {
		t.Fatal(err)
	}
	if err := loopdev.Writable(dev); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Errorf("writing to %s after Writable: %v", dev, err)
	}
}

func setReadOnly(dev string, ro int) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.BLKROSET, ro)
}

// A loop device is found by its file, not the path it was attached by:
// another mount namespace (a restarted agent's container) sees the file
// at another path. A hard link stands for that path here.
func TestFindMatchesTheFileNotThePath(t *testing.T) {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "losetup")
	dir := t.TempDir()
	file, other := filepath.Join(dir, "disk.img"), filepath.Join(dir, "same-disk.img")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(file, other); err != nil {
		t.Fatal(err)
	}
	dev, err := loopdev.Attach(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopdev.DetachUnder(dir) })
	again, err := loopdev.Attach(other)
	if err != nil || again != dev {
		t.Fatalf("attaching the file by another path gave %q (%v), want its device %s", again, err, dev)
	}
	if !loopdev.Backs(dev, other) {
		t.Errorf("Backs(%s, %s) is false", dev, other)
	}
	lone := filepath.Join(dir, "other.img")
	if err := os.WriteFile(lone, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if found, err := loopdev.Find(lone); err != nil || found != "" || loopdev.Backs(dev, lone) {
		t.Errorf("a file no device backs: Find = %q (%v), Backs = %v", found, err, loopdev.Backs(dev, lone))
	}
}
