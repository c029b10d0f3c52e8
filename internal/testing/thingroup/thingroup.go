// Package thingroup makes, for a test, a real volume group with a thin
// pool on a loop disk, managed by the loopback volume manager: what the
// LVM mover's tests replicate between.
package thingroup

import (
	"context"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Pool is the thin pool's name.
const Pool = "pool"

// New makes the group vg on a loop disk of diskSize bytes with a thin
// pool of poolSize bytes, all removed when the test ends.
func New(t testing.TB, vg string, diskSize, poolSize uint64) *lvm.Loopback {
	t.Helper()
	testenv.NeedRoot(t, "physical volumes")
	testenv.NeedTools(t, "lvm", "losetup")
	ctx := context.Background()
	m, err := lvm.NewLoopback(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	disk := testenv.LoopDisk(t, int64(diskSize))
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{vg}, disk) })
	t.Cleanup(func() { testenv.DetachLoopDevicesUnder(t, m.Dir) })
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
