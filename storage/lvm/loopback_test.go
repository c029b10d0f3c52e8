package lvm

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// loopbackGroup is a loopback manager with a real one-disk group.
func loopbackGroup(t *testing.T) (*Loopback, string) {
	t.Helper()
	testenv.NeedRoot(t, "physical volumes")
	testenv.NeedTools(t, "lvm", "losetup")
	m, err := NewLoopback(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vg := "strata-lb-" + strings.ReplaceAll(t.Name(), "/", "-")
	disk := testenv.LoopDisk(t, 128*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{vg}, disk) })
	if err := m.CreatePhysicalVolume(ctx, disk); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateVolumeGroup(ctx, vg, []string{disk}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DetachLoopDevicesUnder(t, m.Dir) })
	return m, vg
}

// A crash between writing a volume's file and its record leaves a file
// that no record claims: the volume does not exist, and creating it again
// reuses the file, blank.
func TestLoopbackCreateAfterACrash(t *testing.T) {
	m, vg := loopbackGroup(t)
	ctx := context.Background()
	if err := m.createImage(ctx, vg, "v", 8*mib); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.image(vg, "v"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FindVolume(ctx, m, vg, "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a volume without a record: %v, want ErrNotFound", err)
	}
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "v", Size: 8 * mib}); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, mustDevice(t, m, vg, "v"), 0, 5); string(got) == "stale" {
		t.Fatalf("a new volume holds the data of an interrupted create")
	}
}

// A crash in a removal after the file went leaves a record: the device is
// refused with what to do, and removing again finishes.
func TestLoopbackRemoveAfterACrash(t *testing.T) {
	m, vg := loopbackGroup(t)
	ctx := context.Background()
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "v", Size: 8 * mib}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.image(vg, "v")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DevicePath(ctx, vg, "v"); err == nil || !strings.Contains(err.Error(), "remove it again") {
		t.Fatalf("device of a half-removed volume: %v", err)
	}
	if err := m.RemoveVolume(ctx, vg, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := FindVolume(ctx, m, vg, "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after removal: %v", err)
	}
}

// A volume removed while its group is listed is left out of the listing,
// as lvs would: the listing, and the group's free space the agent reports
// as capacity, do not fail for it. The removal is pinned between the
// directory read and the record read by a record that is listed but
// cannot be found (a dangling link).
func TestLoopbackListingSkipsAVolumeRemovedMeanwhile(t *testing.T) {
	m, vg := loopbackGroup(t)
	ctx := context.Background()
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "kept", Size: 8 * mib}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(m.recordPath(vg, "removed-meanwhile")+".gone", m.recordPath(vg, "removed-meanwhile")); err != nil {
		t.Fatal(err)
	}
	lvs, err := m.LogicalVolumes(ctx, vg)
	if err != nil {
		t.Fatalf("listing with a volume removed meanwhile: %v", err)
	}
	if len(lvs) != 1 || lvs[0].Name != "kept" {
		t.Errorf("listed %v, want only kept", lvs)
	}
	if _, err := FindVolumeGroupOf(ctx, m, vg); err != nil {
		t.Errorf("the group's free space with a volume removed meanwhile: %v", err)
	}
}
