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
