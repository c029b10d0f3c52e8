package csi

import (
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
