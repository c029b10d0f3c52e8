package disks

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvm"
)

const (
	mib        = 1 << 20
	managedTag = "strata.dev/managed"
)

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// refusals inspects one device and applies the policy.
func refusals(t *testing.T, dev string, p Policy) []string {
	t.Helper()
	m := lvm.NewLVM2()
	devices, err := NewInspector(m).Devices(context.Background(), dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(devices) != 1 || devices[0].Path != dev {
		t.Fatalf("inspected %+v, want %s", devices, dev)
	}
	groups, err := m.VolumeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return Refusals(devices[0], p, groups)
}

// Every refusal on real loop devices, and the wipe opt-in that lifts only
// the refusals a wipe can cure.
func TestRefusals(t *testing.T) {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "lsblk", "wipefs", "lvm", "mkfs.ext4", "mount")
	policy := Policy{MinSize: 32 * mib, ManagedTag: managedTag}
	force := policy
	force.ForceWipe = true
	vg := fmt.Sprintf("strata-disks-%d", os.Getpid())

	cases := []struct {
		name    string
		prepare func(t *testing.T) string
		want    string // empty: usable
		forced  string // with the wipe opt-in; "same" for want
	}{
		{"blank", func(t *testing.T) string { return testenv.LoopDisk(t, 64*mib) }, "", ""},
		{"too small", func(t *testing.T) string { return testenv.LoopDisk(t, 16*mib) }, "too small", "too small"},
		{"filesystem", func(t *testing.T) string {
			d := testenv.LoopDisk(t, 64*mib)
			run(t, "mkfs.ext4", "-q", d)
			return d
		}, "holds data: ext4 signature", ""},
		{"mounted", func(t *testing.T) string {
			d := testenv.LoopDisk(t, 64*mib)
			run(t, "mkfs.ext4", "-q", d)
			dir := t.TempDir()
			run(t, "mount", d, dir)
			t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
			return d
		}, "mounted at /", "mounted at /"},
		{"read-only", func(t *testing.T) string {
			img := filepath.Join(t.TempDir(), "ro.img")
			run(t, "truncate", "-s", "64M", img)
			out, err := exec.Command("losetup", "--find", "--show", "--read-only", img).Output()
			if err != nil {
				t.Fatal(err)
			}
			d := strings.TrimSpace(string(out))
			t.Cleanup(func() { _ = exec.Command("losetup", "--detach", d).Run() })
			return d
		}, "read-only", "read-only"},
		{"physical volume of someone else", func(t *testing.T) string {
			d := testenv.LoopDisk(t, 64*mib)
			run(t, "lvm", "pvcreate", "-qq", d)
			t.Cleanup(func() { _ = exec.Command("lvm", "pvremove", "-ff", "-y", d).Run() })
			return d
		}, "an LVM physical volume outside any volume group", ""},
		{"foreign volume group", func(t *testing.T) string {
			d := testenv.LoopDisk(t, 64*mib)
			run(t, "lvm", "vgcreate", vg+"-foreign", d)
			t.Cleanup(func() { _ = exec.Command("lvm", "vgremove", "-ff", vg+"-foreign").Run() })
			return d
		}, "in volume group " + vg + "-foreign, which strata does not manage", "which strata does not manage"},
		{"mapped by a loop device, as kubelet maps a raw block volume", func(t *testing.T) string {
			d := testenv.LoopDisk(t, 64*mib)
			out, err := exec.Command("losetup", "--find", "--show", d).Output()
			if err != nil {
				t.Fatal(err)
			}
			mapping := strings.TrimSpace(string(out))
			t.Cleanup(func() { _ = exec.Command("losetup", "--detach", mapping).Run() })
			return d
		}, "mapped by loop device /dev/loop", "mapped by loop device /dev/loop"},
		{"another class's group", func(t *testing.T) string {
			d := testenv.LoopDisk(t, 64*mib)
			run(t, "lvm", "vgcreate", "--addtag", managedTag, vg+"-own", d)
			t.Cleanup(func() { _ = exec.Command("lvm", "vgremove", "-ff", vg+"-own").Run() })
			return d
		}, "already in strata's volume group " + vg + "-own, of another device class", "of another device class"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := tc.prepare(t)
			check(t, "without the wipe opt-in", refusals(t, dev, policy), tc.want)
			check(t, "with the wipe opt-in", refusals(t, dev, force), tc.forced)
		})
	}
}

func check(t *testing.T, when string, got []string, want string) {
	t.Helper()
	joined := strings.Join(got, "; ")
	switch {
	case want == "" && len(got) > 0:
		t.Errorf("%s: refused (%s), want usable", when, joined)
	case want != "" && !strings.Contains(joined, want):
		t.Errorf("%s: refusals %q, want one saying %q", when, joined, want)
	}
}

// A wipe removes the signature that made a device unusable, and says
// what it removed.
func TestWipe(t *testing.T) {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "lsblk", "wipefs", "lvm", "mkfs.ext4")
	dev := testenv.LoopDisk(t, 64*mib)
	run(t, "mkfs.ext4", "-q", dev)
	in := NewInspector(lvm.NewLVM2())
	devices, err := in.Devices(context.Background(), dev)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := in.Wipe(context.Background(), devices[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(removed, ",") != "ext4" {
		t.Errorf("wipe reported %v, want [ext4]", removed)
	}
	check(t, "after the wipe", refusals(t, dev, Policy{MinSize: mib, ManagedTag: managedTag}), "")
}

// A loop device is known by its backing file, whatever loop number it
// gets when attached again.
func TestLoopDevicesHaveTheirFileAsStableID(t *testing.T) {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "lsblk", "wipefs", "lvm")
	dir := t.TempDir()
	dev := testenv.LoopDiskIn(t, dir, 64*mib)
	devices, err := NewInspector(lvm.NewLVM2()).Devices(context.Background(), dev)
	if err != nil {
		t.Fatal(err)
	}
	if id := devices[0].StableID; !strings.HasPrefix(id, "loop-file:"+dir+"/") {
		t.Fatalf("stable ID of %s = %q, want its backing file under %s", dev, id, dir)
	}
}

// fakeTools answers lsblk with a fixed tree and wipefs with nothing.
type fakeTools struct{ lsblk string }

func (f fakeTools) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	if name == "lsblk" {
		return []byte(f.lsblk), nil
	}
	return nil, nil
}

// A device-mapper device on a partition holds the disk; udev's by-id
// name, a WWN first, is the disk's stable ID.
func TestPartitionHoldersAndByIDNames(t *testing.T) {
	sys, byID := t.TempDir(), t.TempDir()
	for _, p := range []string{"sdb/holders", "sdb1/holders/dm-3", "sdc/holders"} {
		if err := os.MkdirAll(filepath.Join(sys, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dev := filepath.Join(t.TempDir(), "sdc")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"ata-DISK-SERIAL": dev, "wwn-0x5000c500a1b2c3d4": dev, "wwn-0x5000c500a1b2c3d4-part1": dev} {
		if err := os.Symlink(target, filepath.Join(byID, name)); err != nil {
			t.Fatal(err)
		}
	}
	tree := fmt.Sprintf(`{"blockdevices": [
	  {"name": "/dev/sdb", "kname": "/dev/sdb", "type": "disk", "size": 1073741824, "ro": false, "rm": false, "mountpoints": [null],
	   "children": [{"name": "/dev/sdb1", "kname": "/dev/sdb1", "type": "part", "size": 1073741824, "ro": false, "rm": false, "mountpoints": [null]}]},
	  {"name": %q, "kname": %q, "type": "disk", "size": 1073741824, "ro": false, "rm": false, "mountpoints": [null]}
	]}`, dev, dev)
	loop, err := lvm.NewLoopback(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := &Inspector{Runner: fakeTools{lsblk: tree}, LVM: loop, SysBlock: sys, ByID: byID,
		LoopBacking: func() (map[string]string, error) { return nil, nil }}
	devices, err := in.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(devices) != 2 {
		t.Fatalf("devices %+v", devices)
	}
	check(t, "a disk whose partition is held", Refusals(devices[0], Policy{ForceWipe: true}, nil), "in use by dm-3")
	if d := devices[1]; d.StableID != "wwn-0x5000c500a1b2c3d4" || d.StablePath != filepath.Join(byID, "wwn-0x5000c500a1b2c3d4") {
		t.Fatalf("stable ID %q at %q, want the WWN name", d.StableID, d.StablePath)
	}
}
