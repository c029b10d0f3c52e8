// Package localdisk prepares disks for the local environment, strata up
// and the tests: a loop-file disk formatted btrfs if blank and mounted,
// and the LVM state of scratch disks forgotten. It formats and wipes, so
// no production package imports it.
package localdisk

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"k8s.io/mount-utils"
)

// MountBtrfs makes disk a btrfs filesystem if it holds none yet and mounts
// it at dir, unless it is mounted there already. A disk holding another
// filesystem is refused, untouched.
func MountBtrfs(disk, dir string) error {
	if err := FormatBtrfs(disk); err != nil {
		return err
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

// FormatBtrfs makes disk a btrfs filesystem if it holds none yet. A disk
// holding another filesystem is refused, untouched.
func FormatBtrfs(disk string) error {
	fs, err := filesystemOn(disk)
	if err != nil {
		return err
	}
	switch fs {
	case "":
		if out, err := exec.Command("mkfs.btrfs", "--quiet", disk).CombinedOutput(); err != nil {
			return fmt.Errorf("mkfs.btrfs %s: %v: %s", disk, err, out)
		}
	case "btrfs":
	default:
		return fmt.Errorf("disk %s holds %s, not btrfs: wipe it or pick another disk", disk, fs)
	}
	return nil
}

// filesystemOn is the type of the filesystem on disk, "" for a blank
// disk. A disk that cannot be probed is an error: read as blank, it
// would be formatted over whatever it holds.
func filesystemOn(disk string) (string, error) {
	if _, err := os.Stat(disk); err != nil {
		return "", fmt.Errorf("disk %s: %w", disk, err)
	}
	cmd := exec.Command("blkid", "--probe", "--output", "value", "--match-tag", "TYPE", disk)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), nil
	case errors.As(err, &exit) && exit.ExitCode() == 2 && stderr.Len() == 0:
		return "", nil // blkid found nothing: blank
	}
	return "", fmt.Errorf("probing the filesystem on %s with blkid: %v: %s", disk, err, strings.TrimSpace(stderr.String()))
}
