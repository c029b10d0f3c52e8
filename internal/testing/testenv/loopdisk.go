package testenv

import (
	"os"
	"os/exec"
	"testing"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
)

// LoopDisk returns a loop device backed by a new sparse file of size
// bytes, detached when the test ends. It needs root and losetup.
func LoopDisk(t testing.TB, size int64) string {
	t.Helper()
	return LoopDiskIn(t, t.TempDir(), size)
}

// LoopDiskIn is LoopDisk with the file in dir (several may share one).
func LoopDiskIn(t testing.TB, dir string, size int64) string {
	t.Helper()
	NeedRoot(t, "loop devices")
	img, err := os.CreateTemp(dir, "disk-*.img")
	if err != nil {
		t.Fatal(err)
	}
	img.Close()
	if err := os.Truncate(img.Name(), size); err != nil {
		t.Fatal(err)
	}
	dev, err := loopdev.Attach(img.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("detaching %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// NeedRoot stops a test that must run as root, naming what needs it.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, what+" need root")
	}
}

// NeedTools stops a test when a program it runs is not installed; `make
// test` installs them (hack/packages.sh).
func NeedTools(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Unavailable(t, n+" is not installed (hack/packages.sh installs it)")
		}
	}
}

// DetachLoopDevicesUnder detaches every loop device whose backing file is
// under dir, so that a failed test leaves none attached.
func DetachLoopDevicesUnder(t testing.TB, dir string) {
	if err := loopdev.DetachUnder(dir); err != nil {
		t.Errorf("detaching loop devices under %s: %v", dir, err)
	}
}

// RemoveVolumeGroup takes a test's volume groups and the LVM labels of
// its disks away, whatever the code under test left.
func RemoveVolumeGroup(groups []string, disks ...string) { localdisk.ForgetLVM(groups, disks...) }
