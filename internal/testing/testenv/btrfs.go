package testenv

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/strata-gitops/strata/internal/local/localdisk"
)

// BtrfsDisk mounts a new btrfs filesystem of size bytes, on a loop device,
// and returns where. When the test ends every mount under it is
// unmounted and the device detached.
func BtrfsDisk(t testing.TB, size int64) string {
	t.Helper()
	NeedTools(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	dev := LoopDiskIn(t, dir, size) // registered first, so detached last
	mnt := filepath.Join(dir, "mnt")
	if err := localdisk.MountBtrfs(dev, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "--recursive", mnt).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}
