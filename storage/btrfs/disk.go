package btrfs

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"k8s.io/mount-utils"
)

// MountDisk makes disk a btrfs filesystem if it holds none yet and mounts
// it at dir, unless it is mounted there already. A disk holding another
// filesystem is refused, untouched.
func MountDisk(disk, dir string) error {
	out, _ := exec.Command("blkid", "-o", "value", "-s", "TYPE", disk).Output()
	switch fs := strings.TrimSpace(string(out)); fs {
	case "":
		if out, err := exec.Command("mkfs.btrfs", "--quiet", disk).CombinedOutput(); err != nil {
			return fmt.Errorf("mkfs.btrfs %s: %v: %s", disk, err, out)
		}
	case "btrfs":
	default:
		return fmt.Errorf("disk %s holds %s, not btrfs: wipe it or pick another disk", disk, fs)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if mounted, err := mount.New("").IsMountPoint(dir); err == nil && mounted {
		return nil
	}
	if out, err := exec.Command("mount", disk, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mounting %s at %s: %v: %s", disk, dir, err, out)
	}
	return nil
}
