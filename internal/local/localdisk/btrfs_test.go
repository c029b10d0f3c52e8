package localdisk_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// MountDisk formats only a blank disk: a disk with another filesystem is
// refused and keeps it, and mounting a mounted disk again is done.
func TestMountDiskFormatsOnlyABlankDisk(t *testing.T) {
	testenv.NeedRoot(t, "loop devices and mounts")
	testenv.NeedTools(t, "mkfs.btrfs", "mkfs.ext4", "blkid")
	ext4 := testenv.LoopDisk(t, 256<<20)
	if out, err := exec.Command("mkfs.ext4", "-q", ext4).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	err := localdisk.MountBtrfs(ext4, filepath.Join(t.TempDir(), "mnt"))
	if err == nil || !strings.Contains(err.Error(), "holds ext4") {
		t.Fatalf("MountDisk of an ext4 disk: %v, want a refusal naming ext4", err)
	}
	if out, _ := exec.Command("blkid", "-o", "value", "-s", "TYPE", ext4).Output(); strings.TrimSpace(string(out)) != "ext4" {
		t.Fatalf("the refused disk now holds %q", out)
	}
	mnt := testenv.BtrfsDisk(t, 256<<20) // formatted and mounted by MountDisk
	dev, err := exec.Command("findmnt", "-n", "-o", "SOURCE", mnt).Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := localdisk.MountBtrfs(strings.TrimSpace(string(dev)), mnt); err != nil {
		t.Fatalf("mounting a mounted disk again: %v", err)
	}
	if out, _ := exec.Command("findmnt", "-n", "-o", "SOURCE", mnt).Output(); strings.Count(string(out), "\n") != 1 {
		t.Errorf("%s is mounted more than once: %s", mnt, out)
	}
}

// A disk whose filesystem blkid cannot name for sure (two signatures) is
// not blank: it is refused, untouched, not formatted over.
func TestMountDiskRefusesADiskItCannotProbe(t *testing.T) {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "mkfs.btrfs", "mkfs.ext4", "blkid", "wipefs")
	dir := t.TempDir()
	other := filepath.Join(dir, "btrfs.img")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(other, 256<<20); err != nil {
		t.Fatal(err)
	}
	disk := testenv.LoopDisk(t, 256<<20)
	for _, cmd := range [][]string{
		{"mkfs.btrfs", "-q", other},
		{"mkfs.ext4", "-q", "-F", disk},
		// btrfs's superblock, at 64 KiB, into the ext4 disk: two signatures.
		{"dd", "if=" + other, "of=" + disk, "bs=4096", "skip=16", "seek=16", "count=1", "conv=notrunc"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	err := localdisk.MountBtrfs(disk, filepath.Join(dir, "mnt"))
	if err == nil || !strings.Contains(err.Error(), "probing the filesystem on "+disk) {
		t.Fatalf("MountDisk of a disk with two signatures: %v, want a refusal saying it could not be probed", err)
	}
	if out, _ := exec.Command("wipefs", "--no-act", "--output", "TYPE", "--noheadings", disk).Output(); !strings.Contains(string(out), "ext4") {
		t.Fatalf("the refused disk lost its ext4 signature; wipefs says %q", out)
	}
}
