// Package disks finds a node's block devices and decides, with a reason
// for every refusal, which of them a device class may use. It reads
// lsblk and wipefs as JSON and sysfs; it never relies on udev, which a
// minimal node may not run.
package disks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-gitops/strata/internal/command"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Device is a whole block device and what is on it.
type Device struct {
	Path                string
	Size                uint64
	ReadOnly, Removable bool
	// Mountpoints of the device and of its partitions.
	Mountpoints []string
	// Partitions and other devices stacked on it (device-mapper holders).
	Partitions, Holders []string
	// Signatures wipefs finds: filesystems, partition tables, LVM, RAID.
	Signatures []string
	// VolumeGroup, when the device is an LVM physical volume in one.
	VolumeGroup string
	// PhysicalVolume is set when the device is an LVM physical volume.
	PhysicalVolume bool
	// Unprobed says why its signatures could not be read, if so.
	Unprobed string
	// MappedBy are the loop devices whose backing file is this device:
	// kubelet maps a raw block volume of any CSI driver so.
	MappedBy []string
	// StableID names the disk whatever /dev/sdX it gets after a reboot:
	// its /dev/disk/by-id name, its WWID from sysfs, or a loop device's
	// backing file. Empty when none is known.
	StableID string
	// StablePath is its /dev/disk/by-id path, when udev made one.
	StablePath string
}

// Inspector reads the node's devices.
type Inspector struct {
	Runner command.Runner
	LVM    lvm.Manager
	// SysBlock is sysfs's /sys/class/block.
	SysBlock string
	// ByID is udev's /dev/disk/by-id.
	ByID string
	// LoopBacking maps loop devices to their backing files.
	LoopBacking func() (map[string]string, error)
}

// NewInspector reads devices with the real tools.
func NewInspector(m lvm.Manager) *Inspector {
	return &Inspector{Runner: command.Exec{}, LVM: m, SysBlock: "/sys/class/block", ByID: "/dev/disk/by-id", LoopBacking: loopdev.BackingFiles}
}

type lsblkDevice struct {
	Name        string        `json:"name"`
	Kname       string        `json:"kname"`
	Type        string        `json:"type"`
	Size        uint64        `json:"size"`
	RO          bool          `json:"ro"`
	RM          bool          `json:"rm"`
	Mountpoints []*string     `json:"mountpoints"`
	Children    []lsblkDevice `json:"children"`
}

// Devices lists every whole disk and loop device of the node, or only the
// given paths (symlinks such as /dev/disk/by-id/... are followed).
func (i *Inspector) Devices(ctx context.Context, paths ...string) ([]Device, error) {
	var real []string
	for _, p := range paths {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("device %s: %w", p, err)
		}
		real = append(real, r)
	}
	return i.list(ctx, real, func(b lsblkDevice) bool { return b.Type == "disk" || b.Type == "loop" })
}

// Candidates lists what a device class without a deviceSelector may use:
// the node's whole disks, and loop devices only when their backing file
// is under loopDir (development machines whose disks are loop devices;
// empty in production). A loop device is otherwise someone's file, such
// as a loopback volume, never a disk to take.
func (i *Inspector) Candidates(ctx context.Context, loopDir string) ([]Device, error) {
	var backing map[string]string
	if loopDir != "" {
		var err error
		if backing, err = loopdev.BackingFiles(); err != nil {
			return nil, err
		}
	}
	prefix := strings.TrimSuffix(loopDir, "/") + "/"
	return i.list(ctx, nil, func(b lsblkDevice) bool {
		return b.Type == "disk" || (b.Type == "loop" && loopDir != "" && strings.HasPrefix(backing[b.Kname], prefix))
	})
}

// list inspects the devices lsblk reports (all, or those of paths) that
// keep selects; only those are probed further.
func (i *Inspector) list(ctx context.Context, paths []string, keep func(lsblkDevice) bool) ([]Device, error) {
	args := append([]string{"--json", "--bytes", "--paths", "--tree", "--output", "NAME,KNAME,TYPE,SIZE,RO,RM,MOUNTPOINTS"}, paths...)
	out, err := i.Runner.Run(ctx, "lsblk", args...)
	if err != nil {
		return nil, err
	}
	var tree struct {
		Devices []lsblkDevice `json:"blockdevices"`
	}
	if err := json.Unmarshal(out, &tree); err != nil {
		return nil, fmt.Errorf("reading lsblk --json: %w", err)
	}
	pvs, err := i.LVM.PhysicalVolumes(ctx)
	if err != nil {
		return nil, err
	}
	loops, err := i.LoopBacking()
	if err != nil {
		return nil, err
	}
	byID, err := i.stableLinks()
	if err != nil {
		return nil, err
	}
	var devices []Device
	for _, b := range tree.Devices {
		if !keep(b) {
			continue
		}
		d, err := i.device(ctx, b, pvs)
		if err == nil {
			i.identify(&d, b, loops, byID)
		}
		if err != nil {
			return nil, err
		}
		devices = append(devices, d)
	}
	return devices, nil
}

func (i *Inspector) device(ctx context.Context, b lsblkDevice, pvs []lvm.PhysicalVolume) (Device, error) {
	d := Device{Path: b.Name, Size: b.Size, ReadOnly: b.RO, Removable: b.RM}
	var walk func(lsblkDevice, bool)
	var holdersErr error
	walk = func(n lsblkDevice, top bool) {
		for _, m := range n.Mountpoints {
			if m != nil && *m != "" {
				d.Mountpoints = append(d.Mountpoints, *m)
			}
		}
		if !top && n.Type == "part" {
			d.Partitions = append(d.Partitions, n.Name)
		}
		// A partition's holders (a device-mapper device on sda1) hold
		// the disk as surely as the disk's own.
		if top || n.Type == "part" {
			holders, err := i.holders(n)
			d.Holders = append(d.Holders, holders...)
			holdersErr = errors.Join(holdersErr, err)
		}
		for _, c := range n.Children {
			walk(c, false)
		}
	}
	walk(b, true)
	if holdersErr != nil {
		return Device{}, holdersErr
	}
	var err error
	if d.Signatures, err = i.signatures(ctx, b.Name); err != nil {
		// The kernel refuses probes of some devices in use (a mounted
		// system disk); such a device is refused, not the whole listing.
		d.Unprobed = err.Error()
	}
	for _, pv := range pvs {
		if pv.Device == b.Name || pv.Device == b.Kname {
			d.PhysicalVolume, d.VolumeGroup = true, pv.VolumeGroup
		}
	}
	return d, nil
}

// holders names the devices stacked on n, read from sysfs.
func (i *Inspector) holders(n lsblkDevice) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(i.SysBlock, filepath.Base(n.Kname), "holders"))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading the holders of %s: %w", n.Name, err)
	}
	var names []string
	for _, h := range entries {
		names = append(names, h.Name())
	}
	return names, nil
}

// stableLinks maps each device udev named in /dev/disk/by-id to its
// names there, sorted; none where udev does not run.
func (i *Inspector) stableLinks() (map[string][]string, error) {
	entries, err := os.ReadDir(i.ByID)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", i.ByID, err)
	}
	links := map[string][]string{}
	for _, e := range entries {
		if strings.Contains(e.Name(), "-part") {
			continue // a partition's
		}
		target, err := filepath.EvalSymlinks(filepath.Join(i.ByID, e.Name()))
		if err != nil {
			continue // a link that went stale meanwhile
		}
		links[target] = append(links[target], e.Name())
	}
	for _, names := range links {
		sort.Slice(names, func(a, b int) bool {
			return idRank(names[a]) < idRank(names[b]) || idRank(names[a]) == idRank(names[b]) && names[a] < names[b]
		})
	}
	return links, nil
}

// idRank prefers names that follow the disk anywhere: its WWN first.
func idRank(name string) int {
	if strings.HasPrefix(name, "wwn-") {
		return 0
	}
	return 1
}

// identify fills what names d stably and which loop devices map it.
func (i *Inspector) identify(d *Device, b lsblkDevice, loops map[string]string, byID map[string][]string) {
	for loop, file := range loops {
		if file == b.Name || file == b.Kname {
			d.MappedBy = append(d.MappedBy, loop)
		}
	}
	sort.Strings(d.MappedBy)
	if names := byID[b.Kname]; len(names) > 0 {
		d.StableID, d.StablePath = names[0], filepath.Join(i.ByID, names[0])
		return
	}
	for _, f := range []string{"wwid", "device/wwid"} {
		if data, err := os.ReadFile(filepath.Join(i.SysBlock, filepath.Base(b.Kname), f)); err == nil && strings.TrimSpace(string(data)) != "" {
			d.StableID = "wwid:" + strings.TrimSpace(string(data))
			return
		}
	}
	if file := loops[b.Kname]; file != "" {
		d.StableID = "loop-file:" + file
	}
}

// signatures probes the device itself, as wipefs would wipe it.
func (i *Inspector) signatures(ctx context.Context, dev string) ([]string, error) {
	out, err := i.Runner.Run(ctx, "wipefs", "--no-act", "--json", dev)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(out)) == "" {
		return nil, nil // nothing found prints nothing
	}
	var found struct {
		Signatures []struct {
			Type string `json:"type"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(out, &found); err != nil {
		return nil, fmt.Errorf("reading wipefs --json for %s: %w", dev, err)
	}
	var types []string
	for _, s := range found.Signatures {
		types = append(types, s.Type)
	}
	sort.Strings(types)
	return types, nil
}

// Policy is what a device class allows.
type Policy struct {
	MinSize uint64
	// ManagedTag marks strata's volume groups.
	ManagedTag string
	// ForceWipe allows using a device whose signatures (a filesystem, a
	// partition table, an LVM label outside any group) would be wiped.
	ForceWipe bool
	// Discovered is for a class without paths, which takes blank disks
	// only and never wipes: the refusals say how to name a disk instead.
	Discovered bool
}

// wipeHint says how a device with data could still be used.
func (p Policy) wipeHint() string {
	if p.Discovered {
		return "a class without paths takes only blank disks; name it in deviceSelector.paths with forceWipeDevicesAndDestroyAllData to wipe and use it"
	}
	return "set forceWipeDevicesAndDestroyAllData to wipe it"
}

// Refusals says why d may not join a device class; none means it may.
// The caller leaves out the devices already in the class's own group.
func Refusals(d Device, p Policy, groups []lvm.VolumeGroup) []string {
	var why []string
	add := func(format string, args ...any) { why = append(why, fmt.Sprintf(format, args...)) }
	if d.ReadOnly {
		add("read-only")
	}
	if d.Removable {
		add("removable")
	}
	if d.Size < p.MinSize {
		add("too small: %d bytes, at least %d needed", d.Size, p.MinSize)
	}
	for _, m := range d.Mountpoints {
		if m == "/" || m == "/boot" || strings.HasPrefix(m, "/boot/") {
			add("holds the system's %s filesystem", m)
		} else {
			add("mounted at %s", m)
		}
	}
	if len(d.Holders) > 0 {
		add("in use by %s", strings.Join(d.Holders, ", "))
	}
	if len(d.MappedBy) > 0 {
		add("mapped by loop device %s (kubelet maps a raw block volume of another CSI driver so)", strings.Join(d.MappedBy, ", "))
	}
	if d.Unprobed != "" {
		add("its signatures cannot be read (%s)", d.Unprobed)
	}
	if d.VolumeGroup != "" {
		if managed(d.VolumeGroup, p.ManagedTag, groups) {
			add("already in strata's volume group %s, of another device class", d.VolumeGroup)
		} else {
			add("in volume group %s, which strata does not manage (vgreduce it out of that group first)", d.VolumeGroup)
		}
		return why
	}
	if p.ForceWipe {
		return why
	}
	if len(d.Partitions) > 0 {
		add("has partitions %s", strings.Join(d.Partitions, ", "))
	}
	if d.PhysicalVolume {
		add("an LVM physical volume outside any volume group (pvremove it; or %s)", p.wipeHint())
	} else if len(d.Signatures) > 0 {
		add("holds data: %s signature (%s)", strings.Join(d.Signatures, ", "), p.wipeHint())
	}
	return why
}

func managed(vg, tag string, groups []lvm.VolumeGroup) bool {
	for _, g := range groups {
		if g.Name == vg {
			return g.HasTag(tag)
		}
	}
	return false
}

// Wipe erases every signature of d and of its partitions, partitions
// first, and returns what was there. The caller decides that it may:
// only with forceWipeDevicesAndDestroyAllData, once per device, after
// Refusals with ForceWipe found nothing.
func (i *Inspector) Wipe(ctx context.Context, d Device) ([]string, error) {
	for _, p := range d.Partitions {
		if _, err := i.Runner.Run(ctx, "wipefs", "--all", p); err != nil {
			return nil, err
		}
	}
	if _, err := i.Runner.Run(ctx, "wipefs", "--all", d.Path); err != nil {
		return nil, err
	}
	return d.Signatures, nil
}
