package volumeapi_test

import (
	"testing"

	"github.com/strata-gitops/strata/internal/testing/guest"
)

// TestLVMVolumesReplicateOnDeviceMapper runs the LVM mover agent to agent
// in the test guest, where the agents' volume groups are lvm2's thin
// pools on device-mapper (thingroup, lvmtest.Manager) rather than the
// loopback stand-in's.
func TestLVMVolumesReplicateOnDeviceMapper(t *testing.T) {
	guest.Delegate(t, guest.Options{Run: "^TestLVMVolumesReplicateAgentToAgent$", APIServer: true, MemoryMiB: 3072})
}
