package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LoopDisk returns a loop device backed by a new sparse file of size
// bytes, detached when the test ends. It needs root and losetup.
func LoopDisk(t testing.TB, size int64) string {
	t.Helper()
	NeedRoot(t, "loop devices")
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("attaching %s: %v: %s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
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
	out, err := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output()
	if err != nil {
		t.Errorf("listing loop devices: %v", err)
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[1], dir+"/") {
			_ = exec.Command("losetup", "--detach", f[0]).Run()
		}
	}
}
