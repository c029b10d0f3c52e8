// Package thingroup makes, for a test, a real volume group with a thin
// pool on a loop disk, managed by lvmtest.Manager (lvm2 in the test
// guest, the loopback stand-in elsewhere): what the LVM mover's tests
// replicate between.
package thingroup

import (
	"context"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/lvmtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Pool is the thin pool's name.
const Pool = "pool"

// New makes the group vg on a loop disk of diskSize bytes with a thin
// pool of poolSize bytes, all removed when the test ends.
func New(t testing.TB, vg string, diskSize, poolSize uint64) lvm.Manager {
	t.Helper()
	testenv.NeedRoot(t, "physical volumes")
	testenv.NeedTools(t, "lvm", "losetup")
	ctx := context.Background()
	m := lvmtest.Manager(t)
	disk := testenv.LoopDisk(t, int64(diskSize))
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{vg}, disk) })
	if err := m.CreatePhysicalVolume(ctx, disk); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateVolumeGroup(ctx, vg, []string{disk}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateThinPool(ctx, vg, lvm.ThinPoolSpec{Name: Pool, Size: poolSize}); err != nil {
		t.Fatal(err)
	}
	return m
}
