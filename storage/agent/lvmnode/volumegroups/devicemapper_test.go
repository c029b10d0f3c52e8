package volumegroups_test

import (
	"testing"

	"github.com/strata-gitops/strata/internal/testing/guest"
)

// TestOnDeviceMapper runs this package's tests again in the test guest,
// with lvm2 on device-mapper (lvmtest.Manager): an LVMCluster's classes
// become volume groups and thin pools, capacity and overprovisioning are
// reported from real pools, a disk with a filesystem is never wiped
// without its opt-in, and an agent started again adopts what it finds.
func TestOnDeviceMapper(t *testing.T) {
	guest.Delegate(t, guest.Options{Run: "^Test", APIServer: true, MemoryMiB: 3072})
}
