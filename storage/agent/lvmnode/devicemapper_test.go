package lvmnode

import (
	"testing"

	"github.com/strata-gitops/strata/internal/testing/guest"
)

// TestOnDeviceMapper runs this package's tests again in the test guest,
// where their volume groups are lvm2's on device-mapper (lvmtest.Manager)
// rather than the loopback stand-in's: logical volumes made, grown,
// snapshotted and removed through their objects, pairs replicated and
// promoted, fences that stop every writer and survive a restart.
func TestOnDeviceMapper(t *testing.T) {
	guest.Delegate(t, guest.Options{Run: "^Test", APIServer: true, MemoryMiB: 3072})
}
