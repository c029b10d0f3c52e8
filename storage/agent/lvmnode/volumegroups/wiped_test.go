package volumegroups

import (
	"testing"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/disks"
)

// A wipe is remembered by the disk's stable ID, not its /dev name, which
// another disk may have after a reboot.
func TestWipesAreRememberedByStableID(t *testing.T) {
	node := &storagev1alpha1.NodeStatus{Wiped: []storagev1alpha1.WipedDevice{
		{Device: "/dev/sdb", ID: "wwn-0x5000c500a1b2c3d4"},
		{Device: "/dev/sdx"}, // recorded before IDs were kept
	}}
	for _, tc := range []struct {
		d    disks.Device
		want bool
	}{
		{disks.Device{Path: "/dev/sdc", StableID: "wwn-0x5000c500a1b2c3d4"}, true},  // the wiped disk, renamed
		{disks.Device{Path: "/dev/sdb", StableID: "wwn-0x5000c500ffffffff"}, false}, // another disk now at sdb
		{disks.Device{Path: "/dev/sdx"}, true},
	} {
		if got := wipedBefore(node, tc.d); got != tc.want {
			t.Errorf("wipedBefore(%s, %s) = %v, want %v", tc.d.Path, tc.d.StableID, got, tc.want)
		}
	}
}
