package lvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-gitops/strata/internal/command"
	"github.com/strata-gitops/strata/internal/testing/guest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The contract both managers keep, on real loop-device disks. lvm2's runs
// in a guest on Debian's kernel (internal/testing/guest), where
// device-mapper and dm-thin-pool are, whatever the host's kernel has.

const mib = 1 << 20

func TestContractLVM2(t *testing.T) {
	if guest.Delegate(t, guest.Options{}) {
		return
	}
	if !KernelHasDeviceMapper() {
		t.Fatal("the guest's kernel has no device-mapper (no /sys/class/misc/device-mapper)")
	}
	contract(t, NewLVM2())
}

func TestContractLoopback(t *testing.T) {
	m, err := NewLoopback(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DetachLoopDevicesUnder(t, m.Dir) })
	contract(t, m)
}

var groups atomic.Int32

// contractCase is one manager and the group its contract run works in.
type contractCase struct {
	m      Manager
	vg     string
	d1, d2 string
}

func contract(t *testing.T, m Manager) {
	testenv.NeedRoot(t, "physical volumes")
	testenv.NeedTools(t, "lvm", "losetup", "mkfs.ext4", "blkid")
	c := contractCase{m: m, vg: fmt.Sprintf("strata-ct-%d-%d", os.Getpid(), groups.Add(1)),
		d1: testenv.LoopDisk(t, 256*mib), d2: testenv.LoopDisk(t, 128*mib)}
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{c.vg}, c.d1, c.d2) })
	t.Run("physical volumes and groups", c.groups)
	t.Run("a device with a filesystem is refused, not wiped", c.refusesSignature)
	t.Run("thick volumes", c.thick)
	t.Run("thin pools, volumes and snapshots", c.thin)
	t.Run("removal", c.removal)
	t.Run("group removal, with a volume left in it", func(t *testing.T) {
		if err := c.m.CreateVolume(context.Background(), c.vg, VolumeSpec{Name: "left", Size: 8 * mib}); err != nil {
			t.Fatal(err)
		}
		c.groupRemoval(t)
	})
}

// groupRemoval: the group, its volumes and its devices' labels go; a
// second removal finds nothing.
func (c contractCase) groupRemoval(t *testing.T) {
	ctx, m, vg := context.Background(), c.m, c.vg
	if err := m.RemoveVolumeGroup(ctx, vg); err != nil {
		t.Fatal(err)
	}
	if _, err := FindVolumeGroupOf(ctx, m, vg); !errors.Is(err, ErrNotFound) {
		t.Fatalf("group after its removal: %v, want ErrNotFound", err)
	}
	pvs, err := m.PhysicalVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs {
		if pv.Device == c.d1 || pv.Device == c.d2 {
			t.Errorf("%s is still a physical volume after its group was removed", pv.Device)
		}
	}
	if lvs, _ := m.LogicalVolumes(ctx, vg); len(lvs) > 0 {
		t.Errorf("volumes left of a removed group: %v", lvs)
	}
	if err := m.RemoveVolumeGroup(ctx, vg); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second removal: %v, want ErrNotFound", err)
	}
}

func (c contractCase) groups(t *testing.T) {
	ctx, m, vg := context.Background(), c.m, c.vg
	if err := m.CreatePhysicalVolume(ctx, c.d1); err != nil {
		t.Fatal(err)
	}
	if err := m.CreatePhysicalVolume(ctx, c.d1); !errors.Is(err, ErrExists) {
		t.Fatalf("second pvcreate of %s: %v, want ErrExists", c.d1, err)
	}
	if err := m.CreateVolumeGroup(ctx, vg, []string{c.d1}, []string{"strata.dev/managed"}); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateVolumeGroup(ctx, vg, []string{c.d1}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second vgcreate: %v, want ErrExists", err)
	}
	group := mustGroup(t, m, vg)
	if !group.HasTag("strata.dev/managed") || group.Size < 200*mib || group.Free != group.Size || fmt.Sprint(group.Devices) != "["+c.d1+"]" {
		t.Fatalf("new group: %+v", group)
	}
	if err := m.CreatePhysicalVolume(ctx, c.d2); err != nil {
		t.Fatal(err)
	}
	if err := m.ExtendVolumeGroup(ctx, vg, []string{c.d2}); err != nil {
		t.Fatal(err)
	}
	if grown := mustGroup(t, m, vg); grown.Size < group.Size+100*mib || len(grown.Devices) != 2 {
		t.Fatalf("extended group: %+v", grown)
	}
	if err := m.ExtendVolumeGroup(ctx, vg+"-missing", []string{c.d2}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("extending a missing group: %v, want ErrNotFound", err)
	}
}

func (c contractCase) refusesSignature(t *testing.T) {
	ctx, m := context.Background(), c.m
	d3 := testenv.LoopDisk(t, 64*mib)
	if out, err := exec.Command("mkfs.ext4", "-q", d3).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	var cmdErr *command.Error
	if err := m.CreatePhysicalVolume(ctx, d3); !errors.As(err, &cmdErr) {
		t.Fatalf("pvcreate on an ext4 device: %v, want a refusal", err)
	}
	if out, _ := exec.Command("blkid", "-o", "value", "-s", "TYPE", d3).Output(); strings.TrimSpace(string(out)) != "ext4" {
		t.Fatalf("the ext4 signature of %s is gone: %q", d3, out)
	}
}

func (c contractCase) thick(t *testing.T) {
	ctx, m, vg := context.Background(), c.m, c.vg
	free := mustGroup(t, m, vg).Free
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "thick", Size: 20 * mib, Tags: []string{"strata.dev/lv"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "thick", Size: 20 * mib}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	lv := mustVolume(t, m, vg, "thick")
	if lv.Kind != Thick || lv.Size < 20*mib || len(lv.Tags) != 1 {
		t.Fatalf("thick volume: %+v", lv)
	}
	if after := mustGroup(t, m, vg).Free; after > free-20*mib {
		t.Fatalf("group free %d after a 20 MiB volume, was %d", after, free)
	}
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "huge", Size: mustGroup(t, m, vg).Free + 64*mib}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("oversized volume: %v, want ErrNoSpace", err)
	}
	if _, err := FindVolume(ctx, m, vg, "huge"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused volume exists: %v", err)
	}
	dev := mustDevice(t, m, vg, "thick")
	writeAt(t, dev, 0, []byte("strata"))
	if err := m.ResizeVolume(ctx, vg, "thick", 40*mib); err != nil {
		t.Fatal(err)
	}
	if size := deviceSize(t, mustDevice(t, m, vg, "thick")); size < 40*mib {
		t.Fatalf("device is %d bytes after growing to 40 MiB", size)
	}
	if got := readAt(t, mustDevice(t, m, vg, "thick"), 0, 6); string(got) != "strata" {
		t.Fatalf("data after resize: %q", got)
	}
	if err := m.ResizeVolume(ctx, vg, "thick", 10*mib); !errors.Is(err, ErrShrink) {
		t.Fatalf("shrink: %v, want ErrShrink", err)
	}
	if err := m.CreateSnapshot(ctx, vg, "thick-snap", "thick", nil); !errors.Is(err, ErrNotThin) {
		t.Fatalf("snapshot of a thick volume: %v, want ErrNotThin", err)
	}
}

func (c contractCase) thin(t *testing.T) {
	ctx, m, vg := context.Background(), c.m, c.vg
	if err := m.CreateThinPool(ctx, vg, ThinPoolSpec{Name: "pool", Size: 64 * mib, MetadataSize: 4 * mib}); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "thin", Size: 128 * mib, Pool: "pool"}); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateVolume(ctx, vg, VolumeSpec{Name: "stray", Size: mib, Pool: "thick"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a thin volume in a thick volume: %v, want ErrNotFound", err)
	}
	thin := mustVolume(t, m, vg, "thin")
	if thin.Kind != Thin || thin.Pool != "pool" || thin.Size < 128*mib {
		t.Fatalf("thin volume: %+v", thin)
	}
	dev := mustDevice(t, m, vg, "thin")
	writeAt(t, dev, 0, bytes.Repeat([]byte("a"), 4*mib))
	if pool := mustVolume(t, m, vg, "pool"); pool.Kind != ThinPool || pool.DataPercent <= 0 || pool.MetadataPercent <= 0 {
		t.Fatalf("pool after 4 MiB written: %+v", pool)
	}
	if err := m.CreateSnapshot(ctx, vg, "snap", "thin", []string{"strata.dev/snapshot"}); err != nil {
		t.Fatal(err)
	}
	writeAt(t, dev, 0, []byte("b"))
	snap := mustVolume(t, m, vg, "snap")
	if snap.Kind != Thin || snap.Origin != "thin" || snap.Pool != "pool" {
		t.Fatalf("snapshot: %+v", snap)
	}
	if got := readAt(t, mustDevice(t, m, vg, "snap"), 0, 2); string(got) != "aa" {
		t.Fatalf("snapshot holds %q, want the origin's data at snapshot time", got)
	}
	if err := m.ExtendThinPool(ctx, vg, "pool", 0, 8*mib); err != nil {
		t.Fatal(err)
	}
	if pool := mustVolume(t, m, vg, "pool"); pool.MetadataSize < 8*mib {
		t.Fatalf("pool metadata %d after growing to 8 MiB", pool.MetadataSize)
	}
	if err := m.ExtendThinPool(ctx, vg, "pool", 32*mib, 0); !errors.Is(err, ErrShrink) {
		t.Fatalf("pool shrink: %v, want ErrShrink", err)
	}
	if err := m.RemoveVolume(ctx, vg, "pool"); !errors.Is(err, ErrInUse) {
		t.Fatalf("removing a pool with volumes: %v, want ErrInUse", err)
	}
}

func (c contractCase) removal(t *testing.T) {
	ctx, m, vg := context.Background(), c.m, c.vg
	for _, name := range []string{"snap", "thin", "pool", "thick"} {
		if err := m.RemoveVolume(ctx, vg, name); err != nil {
			t.Fatal(err)
		}
		if err := m.RemoveVolume(ctx, vg, name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second removal of %s: %v, want ErrNotFound", name, err)
		}
	}
	if group := mustGroup(t, m, vg); group.Free != group.Size {
		t.Fatalf("group after removing everything: %+v", group)
	}
}

func mustGroup(t *testing.T, m Manager, name string) VolumeGroup {
	t.Helper()
	vg, err := FindVolumeGroupOf(context.Background(), m, name)
	if err != nil {
		t.Fatal(err)
	}
	return vg
}

func mustVolume(t *testing.T, m Manager, vg, name string) LogicalVolume {
	t.Helper()
	lv, err := FindVolume(context.Background(), m, vg, name)
	if err != nil {
		t.Fatal(err)
	}
	return lv
}

func mustDevice(t *testing.T, m Manager, vg, name string) string {
	t.Helper()
	dev, err := m.DevicePath(context.Background(), vg, name)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

func writeAt(t *testing.T, dev string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, dev string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}

func deviceSize(t *testing.T, dev string) int64 {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	return size
}
