// Package loopdev attaches files as loop devices, finds them and
// detaches them: the loopback volume manager's volumes, and the
// loop-file disks of strata up and the tests.
package loopdev

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Attach returns the loop device backed by file, attaching it unless one
// already is (a second `strata up` finds its disks attached).
func Attach(file string) (string, error) {
	if dev, err := Find(file); err != nil || dev != "" {
		return dev, err
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("attaching %s as a loop device: %v: %s", file, err, out)
	}
	dev := strings.TrimSpace(string(out))
	return dev, Writable(dev)
}

// Writable clears the read-only flag a fence may have set on a loop
// device (BLKROSET): the kernel keeps it on the device number after a
// detach, so a file attached later to the same number would otherwise
// refuse every write.
func Writable(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.BLKROSET, 0); err != nil {
		return fmt.Errorf("making %s writable: %w", dev, err)
	}
	return nil
}

// DetachUnder detaches every loop device whose backing file is under dir.
func DetachUnder(dir string) error {
	devices, err := BackingFiles()
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

// Find returns the loop device backed by file, or "" when none is. It
// matches the file itself (its device and inode), not its path: the path
// the kernel reports is the attaching process's, which another mount
// namespace does not share. A node agent restarted in a new container
// would otherwise not find its volumes' devices and attach them again.
func Find(file string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(file, &st); errors.Is(err, unix.ENOENT) {
		return "", nil // no file, so no device has it behind it
	} else if err != nil {
		return "", fmt.Errorf("finding the loop device of %s: %w", file, err)
	}
	devices, err := BackingFiles()
	for dev := range devices {
		if backsFile(dev, &st) {
			return dev, err
		}
	}
	return "", err
}

// Backs says whether device is attached with file behind it.
func Backs(device, file string) bool {
	var st unix.Stat_t
	return unix.Stat(file, &st) == nil && backsFile(device, &st)
}

// backsFile asks the loop device for its backing file's device and
// inode.
func backsFile(device string, st *unix.Stat_t) bool {
	fd, err := unix.Open(device, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlLoopGetStatus64(fd)
	return err == nil && info.Device == st.Dev && info.Inode == st.Ino
}

// BackingFiles maps attached loop devices (/dev/loopN) to their backing
// files, read from sysfs: a program run per look would cost more than the
// look itself.
func BackingFiles() (map[string]string, error) {
	paths, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	devices := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // detached meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("listing loop devices: %w", err)
		}
		name := filepath.Base(filepath.Dir(filepath.Dir(p)))
		devices["/dev/"+name] = strings.TrimSuffix(string(data), "\n")
	}
	return devices, nil
}
