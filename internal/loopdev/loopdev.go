// Package loopdev attaches files as loop devices and detaches them, for
// the loop-device disks of tests and of `strata up`.
package loopdev

import (
	"fmt"
	"os/exec"
	"strings"
)

// Attach returns the loop device backed by file, attaching it unless one
// already is (a second `strata up` finds its disks attached).
func Attach(file string) (string, error) {
	if dev, err := find(file); err != nil || dev != "" {
		return dev, err
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("attaching %s as a loop device: %v: %s", file, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// DetachUnder detaches every loop device whose backing file is under dir.
func DetachUnder(dir string) error {
	devices, err := list()
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for dev, file := range devices {
		if strings.HasPrefix(file, prefix) {
			if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
				return fmt.Errorf("detaching %s: %v: %s", dev, err, out)
			}
		}
	}
	return nil
}

func find(file string) (string, error) {
	devices, err := list()
	for dev, f := range devices {
		if f == file {
			return dev, err
		}
	}
	return "", err
}

// list maps attached loop devices to their backing files.
func list() (map[string]string, error) {
	out, err := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output()
	if err != nil {
		return nil, fmt.Errorf("listing loop devices: %w", err)
	}
	devices := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			devices[f[0]] = f[1]
		}
	}
	return devices, nil
}

// ForgetLVM removes volume groups and the LVM labels of scratch disks
// with the real tools, whatever was left on them, before the disks are
// detached. It ignores lvm2's hints, which re-attached disks make stale.
// Only for loop-device disks made for tests and benchmarks.
func ForgetLVM(groups []string, disks ...string) {
	for _, vg := range groups {
		_ = exec.Command("lvm", "vgremove", "--config", `devices/hints="none"`, "--force", "--force", vg).Run()
	}
	for _, d := range disks {
		_ = exec.Command("lvm", "pvremove", "--config", `devices/hints="none"`, "--force", "--force", "--yes", d).Run()
	}
}
