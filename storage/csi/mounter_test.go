package csi

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestKernelOptions(t *testing.T) {
	for _, c := range []struct {
		options []string
		flags   uintptr
		data    string
		ok      bool
	}{
		{nil, 0, "", true},
		{[]string{"ro", "noatime", "nouuid"}, unix.MS_RDONLY | unix.MS_NOATIME, "nouuid", true},
		{[]string{"defaults", "discard", "data=ordered"}, 0, "discard,data=ordered", true},
		{[]string{"bind"}, 0, "", false},
		{[]string{"noatime", "x-systemd.automount"}, 0, "", false},
		{[]string{"_netdev"}, 0, "", false},
	} {
		flags, data, ok := kernelOptions(c.options)
		if flags != c.flags || data != c.data || ok != c.ok {
			t.Errorf("kernelOptions(%q) = %#x, %q, %v; want %#x, %q, %v", c.options, flags, data, ok, c.flags, c.data, c.ok)
		}
	}
}

// A network filesystem goes to its mount(8) helper whatever its options:
// the kernel takes an NFS mount only with the address mount.nfs resolves.
func TestNetworkFilesystemsUseTheirHelper(t *testing.T) {
	for _, c := range []struct {
		fstype string
		ok     bool
	}{{"ext4", true}, {"xfs", true}, {"btrfs", true}, {"nfs4", false}, {"nfs", false}, {"cifs", false}, {"fuse.sshfs", false}, {"", false}} {
		if _, _, ok := bySyscall(c.fstype, []string{"vers=4.1", "hard"}); ok != c.ok {
			t.Errorf("bySyscall(%q) = %v, want %v", c.fstype, ok, c.ok)
		}
	}
}

// The mount table names an lvm2 volume by its device-mapper node, the
// agent by the /dev/<vg>/<lv> link to it: they are one device.
func TestSameDevice(t *testing.T) {
	dir := t.TempDir()
	node, link, other := filepath.Join(dir, "dm-3"), filepath.Join(dir, "lv"), filepath.Join(dir, "dm-4")
	for _, f := range []string{node, other} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("dm-3", link); err != nil {
		t.Fatal(err)
	}
	if !sameDevice(link, node) || !sameDevice(node, node) {
		t.Error("a link and the node it names are not the same device")
	}
	if sameDevice(link, other) || sameDevice(filepath.Join(dir, "gone"), filepath.Join(dir, "gone-too")) {
		t.Error("different or missing devices count as one")
	}
}
