package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BtrfsDisk mounts a new btrfs filesystem of size bytes, on a loop device,
// and returns where. When the test ends every mount under it is
// unmounted and the device detached.
func BtrfsDisk(t testing.TB, size int64) string {
	t.Helper()
	NeedTools(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	dev := LoopDiskIn(t, dir, size) // registered first, so detached last
	if out, err := exec.Command("mkfs.btrfs", "--quiet", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs %s: %v: %s", dev, err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", dev, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "--recursive", mnt).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}
