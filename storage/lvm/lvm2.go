package lvm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/strata-gitops/strata/internal/command"
)

// LVM2 drives the lvm2 tools. Reports are always read as JSON
// (--reportformat json), sizes in bytes.
type LVM2 struct {
	Runner command.Runner
}

// NewLVM2 returns a manager that runs the lvm binary.
func NewLVM2() *LVM2 { return &LVM2{Runner: tools} }

var _ Manager = (*LVM2)(nil)

// noHints makes every command scan the devices instead of trusting
// lvm2's hints file: a disk wiped or a loop device re-attached outside
// lvm2 keeps the device list unchanged, so its hints would go on naming
// a volume group that is no longer there.
var noHints = []string{"--config", `devices/hints="none"`}

// lvm runs an lvm2 command; args[0] is its name.
func (l *LVM2) lvm(ctx context.Context, args ...string) error {
	_, err := l.Runner.Run(ctx, "lvm", append(append([]string{args[0]}, noHints...), args[1:]...)...)
	return err
}

// report runs one of pvs, vgs or lvs and returns its rows.
func (l *LVM2) report(ctx context.Context, command, kind string, fields []string, args ...string) ([]map[string]string, error) {
	all := append(append([]string{command}, noHints...), "--reportformat", "json", "--units", "b", "--nosuffix", "-o", strings.Join(fields, ","))
	out, err := l.Runner.Run(ctx, "lvm", append(all, args...)...)
	if err != nil {
		return nil, err
	}
	return reportRows(out, kind)
}

// PhysicalVolumes implements Manager.
func (l *LVM2) PhysicalVolumes(ctx context.Context) ([]PhysicalVolume, error) {
	rows, err := l.report(ctx, "pvs", "pv", []string{"pv_name", "vg_name", "pv_size", "pv_free"})
	if err != nil {
		return nil, err
	}
	pvs := make([]PhysicalVolume, 0, len(rows))
	for _, r := range rows {
		pv := PhysicalVolume{Device: r["pv_name"], VolumeGroup: r["vg_name"]}
		if pv.Size, err = bytesField(r, "pv_size"); err != nil {
			return nil, err
		}
		if pv.Free, err = bytesField(r, "pv_free"); err != nil {
			return nil, err
		}
		pvs = append(pvs, pv)
	}
	return pvs, nil
}

// VolumeGroups implements Manager.
func (l *LVM2) VolumeGroups(ctx context.Context) ([]VolumeGroup, error) {
	rows, err := l.report(ctx, "vgs", "vg", []string{"vg_name", "vg_size", "vg_free", "vg_tags"})
	if err != nil {
		return nil, err
	}
	pvs, err := l.PhysicalVolumes(ctx)
	if err != nil {
		return nil, err
	}
	vgs := make([]VolumeGroup, 0, len(rows))
	for _, r := range rows {
		vg := VolumeGroup{Name: r["vg_name"], Tags: listField(r, "vg_tags")}
		if vg.Size, err = bytesField(r, "vg_size"); err != nil {
			return nil, err
		}
		if vg.Free, err = bytesField(r, "vg_free"); err != nil {
			return nil, err
		}
		for _, pv := range pvs {
			if pv.VolumeGroup == vg.Name {
				vg.Devices = append(vg.Devices, pv.Device)
			}
		}
		vgs = append(vgs, vg)
	}
	return vgs, nil
}

// FindVolumeGroupOf looks a group up by name in m's list, or ErrNotFound.
func FindVolumeGroupOf(ctx context.Context, m Manager, name string) (VolumeGroup, error) {
	vgs, err := m.VolumeGroups(ctx)
	if err != nil {
		return VolumeGroup{}, err
	}
	for _, vg := range vgs {
		if vg.Name == name {
			return vg, nil
		}
	}
	return VolumeGroup{}, named(ErrNotFound, "volume group %s", name)
}

// CreatePhysicalVolume implements Manager. -qq answers "no" to every
// prompt, so a device with a filesystem or another signature is refused
// rather than wiped.
func (l *LVM2) CreatePhysicalVolume(ctx context.Context, device string) error {
	pvs, err := l.PhysicalVolumes(ctx)
	if err != nil {
		return err
	}
	for _, pv := range pvs {
		if pv.Device == device {
			return named(ErrExists, "physical volume %s", device)
		}
	}
	return l.lvm(ctx, "pvcreate", "-qq", device)
}

// CreateVolumeGroup implements Manager.
func (l *LVM2) CreateVolumeGroup(ctx context.Context, name string, devices, tags []string) error {
	if _, err := FindVolumeGroupOf(ctx, l, name); err == nil {
		return named(ErrExists, "volume group %s", name)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	args := append([]string{"vgcreate"}, tagArgs(tags)...)
	return l.lvm(ctx, append(append(args, name), devices...)...)
}

// ExtendVolumeGroup implements Manager.
func (l *LVM2) ExtendVolumeGroup(ctx context.Context, name string, devices []string) error {
	if _, err := FindVolumeGroupOf(ctx, l, name); err != nil {
		return err
	}
	return l.lvm(ctx, append([]string{"vgextend", name}, devices...)...)
}

// RemoveVolumeGroup implements Manager: vgremove with its volumes, then
// pvremove of its devices.
func (l *LVM2) RemoveVolumeGroup(ctx context.Context, name string) error {
	vg, err := FindVolumeGroupOf(ctx, l, name)
	if err != nil {
		return err
	}
	if err := l.lvm(ctx, "vgremove", "--force", "--yes", name); err != nil {
		return err
	}
	if len(vg.Devices) == 0 {
		return nil
	}
	return l.lvm(ctx, append([]string{"pvremove", "--yes"}, vg.Devices...)...)
}

var lvFields = []string{"lv_name", "vg_name", "lv_size", "lv_attr", "pool_lv", "origin", "lv_tags",
	"data_percent", "metadata_percent", "lv_metadata_size"}

// LogicalVolumes implements Manager.
func (l *LVM2) LogicalVolumes(ctx context.Context, vg string) ([]LogicalVolume, error) {
	// A selection, unlike a named group, matches nothing without failing.
	rows, err := l.report(ctx, "lvs", "lv", lvFields, "--select", "vg_name="+vg)
	if err != nil {
		return nil, err
	}
	lvs := make([]LogicalVolume, 0, len(rows))
	for _, r := range rows {
		lv := LogicalVolume{Name: r["lv_name"], VolumeGroup: r["vg_name"], Kind: kindOf(r["lv_attr"]),
			Pool: r["pool_lv"], Origin: r["origin"], Tags: listField(r, "lv_tags"),
			DataPercent: percentField(r, "data_percent"), MetadataPercent: percentField(r, "metadata_percent")}
		if lv.Size, err = bytesField(r, "lv_size"); err != nil {
			return nil, err
		}
		if lv.MetadataSize, err = bytesField(r, "lv_metadata_size"); err != nil {
			return nil, err
		}
		lvs = append(lvs, lv)
	}
	return lvs, nil
}

// kindOf reads the volume type, the first character of lv_attr.
func kindOf(attr string) Kind {
	switch {
	case strings.HasPrefix(attr, "t"):
		return ThinPool
	case strings.HasPrefix(attr, "V"):
		return Thin
	default:
		return Thick
	}
}

// CreateThinPool implements Manager.
func (l *LVM2) CreateThinPool(ctx context.Context, vg string, pool ThinPoolSpec) error {
	if err := checkNew(ctx, l, vg, pool.Name, pool.Size+pool.MetadataSize); err != nil {
		return err
	}
	args := []string{"lvcreate", "--type", "thin-pool", "--name", pool.Name, "--size", byteArg(pool.Size)}
	if pool.MetadataSize > 0 {
		args = append(args, "--poolmetadatasize", byteArg(pool.MetadataSize))
	}
	if pool.ChunkSize > 0 {
		args = append(args, "--chunksize", byteArg(pool.ChunkSize))
	}
	return l.lvm(ctx, append(args, vg)...)
}

// ExtendThinPool implements Manager.
func (l *LVM2) ExtendThinPool(ctx context.Context, vg, pool string, size, metadataSize uint64) error {
	lv, err := FindVolume(ctx, l, vg, pool)
	if err != nil {
		return err
	}
	if lv.Kind != ThinPool {
		return named(ErrNotFound, "thin pool %s/%s (it is a %s volume)", vg, pool, lv.Kind)
	}
	if err := checkGrowth(lv, size, metadataSize); err != nil {
		return err
	}
	if metadataSize > lv.MetadataSize {
		if err := l.lvm(ctx, "lvextend", "--poolmetadatasize", byteArg(metadataSize), vg+"/"+pool); err != nil {
			return err
		}
	}
	if size > lv.Size {
		return l.lvm(ctx, "lvextend", "--size", byteArg(size), vg+"/"+pool)
	}
	return nil
}

// CreateVolume implements Manager.
func (l *LVM2) CreateVolume(ctx context.Context, vg string, spec VolumeSpec) error {
	if spec.Pool == "" {
		if err := checkNew(ctx, l, vg, spec.Name, spec.Size); err != nil {
			return err
		}
		args := append([]string{"lvcreate", "--name", spec.Name, "--size", byteArg(spec.Size), "--wipesignatures", "y", "--yes"}, tagArgs(spec.Tags)...)
		return l.lvm(ctx, append(args, vg)...)
	}
	if err := checkNewThin(ctx, l, vg, spec.Name, spec.Pool); err != nil {
		return err
	}
	args := append([]string{"lvcreate", "--type", "thin", "--name", spec.Name, "--virtualsize", byteArg(spec.Size),
		"--thinpool", spec.Pool}, tagArgs(spec.Tags)...)
	return l.lvm(ctx, append(args, vg)...)
}

// CreateSnapshot implements Manager. A thin snapshot is skipped at
// activation unless told otherwise; it is made active like any volume.
func (l *LVM2) CreateSnapshot(ctx context.Context, vg, name, origin string, tags []string) error {
	if err := checkSnapshot(ctx, l, vg, name, origin); err != nil {
		return err
	}
	args := append([]string{"lvcreate", "--snapshot", "--name", name, "--setactivationskip", "n"}, tagArgs(tags)...)
	return l.lvm(ctx, append(args, vg+"/"+origin)...)
}

// ResizeVolume implements Manager.
func (l *LVM2) ResizeVolume(ctx context.Context, vg, name string, size uint64) error {
	grow, err := checkResize(ctx, l, vg, name, size)
	if err != nil || !grow {
		return err
	}
	return l.lvm(ctx, "lvextend", "--size", byteArg(size), vg+"/"+name)
}

// RemoveVolume implements Manager. A thin pool that still holds volumes
// is refused: lvremove would remove them with it.
func (l *LVM2) RemoveVolume(ctx context.Context, vg, name string) error {
	if err := checkRemove(ctx, l, vg, name); err != nil {
		return err
	}
	return l.lvm(ctx, "lvremove", "--yes", vg+"/"+name)
}

// DevicePath implements Manager.
func (l *LVM2) DevicePath(ctx context.Context, vg, name string) (string, error) {
	if _, err := FindVolume(ctx, l, vg, name); err != nil {
		return "", err
	}
	return "/dev/" + vg + "/" + name, nil
}

func tagArgs(tags []string) []string {
	var args []string
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	return args
}

func byteArg(n uint64) string { return fmt.Sprintf("%db", n) }
