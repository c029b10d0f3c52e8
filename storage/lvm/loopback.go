package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/strata-gitops/strata/internal/command"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/mountinfo"
)

// Loopback keeps physical volumes and volume groups real (lvm2 handles
// them without device-mapper) and makes each logical volume a sparse file,
// <Dir>/<vg>/<name>.img, attached as a loop device when its device is
// asked for. A record beside it, <name>.json, says what it is. Space is
// accounted against the real group: a thick volume or a thin pool takes
// its size from the group's free space. A thin pool is a record only; its
// data usage is what its volumes' files really occupy. Snapshots are
// reflink copies where the filesystem under Dir has them (btrfs, xfs),
// full copies elsewhere. See docs/lvm.md.
type Loopback struct {
	Dir    string
	LVM    *LVM2
	Runner command.Runner

	// mu is taken for writing by changes to the group's space (thick
	// volumes, thin pools), so that space checks hold, and for reading by
	// thin-volume work, which also holds the volume's own lock: thin
	// volumes are made side by side.
	mu      sync.RWMutex
	volumes sync.Map // "vg/name" → *sync.Mutex
	devices sync.Map // volume file → the loop device last seen backed by it
}

// lock takes what a change of one volume needs: the group for writing if
// the change takes or returns group space, for reading otherwise, and the
// volume's own lock. It returns the unlock.
func (l *Loopback) lock(vg, name string, groupSpace bool) func() {
	if groupSpace {
		l.mu.Lock()
	} else {
		l.mu.RLock()
	}
	m, _ := l.volumes.LoadOrStore(vg+"/"+name, &sync.Mutex{})
	volume := m.(*sync.Mutex)
	volume.Lock()
	return func() {
		volume.Unlock()
		if groupSpace {
			l.mu.Unlock()
		} else {
			l.mu.RUnlock()
		}
	}
}

// takesSpace says whether changing the named volume changes the group's
// free space: thick volumes and thin pools do.
func (l *Loopback) takesSpace(vg, name string) bool {
	r, err := l.record(vg, name)
	return err != nil || r.Kind != Thin
}

// NewLoopback returns a loopback manager keeping volume files under dir.
func NewLoopback(dir string) (*Loopback, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	// losetup reports backing files by their resolved path.
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("loopback volume directory %s: %w", abs, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, err
	}
	return &Loopback{Dir: abs, LVM: NewLVM2(), Runner: tools}, nil
}

var _ Manager = (*Loopback)(nil)

// thinMetadataPerChunk models lvm2's thin-pool metadata: bytes used per
// mapped chunk, and the floor lvm2 gives a pool's metadata.
const (
	thinMetadataPerChunk = 64
	thinMetadataMin      = 2 << 20
	defaultChunkSize     = 64 << 10
)

// record is what Loopback stores for each logical volume.
type record struct {
	Name         string   `json:"name"`
	Kind         Kind     `json:"kind"`
	Size         uint64   `json:"size"`
	Pool         string   `json:"pool,omitempty"`
	Origin       string   `json:"origin,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	MetadataSize uint64   `json:"metadataSize,omitempty"`
	ChunkSize    uint64   `json:"chunkSize,omitempty"`
}

// PhysicalVolumes implements Manager.
func (l *Loopback) PhysicalVolumes(ctx context.Context) ([]PhysicalVolume, error) {
	return l.LVM.PhysicalVolumes(ctx)
}

// VolumeGroups implements Manager: the real groups, less what the volume
// files have been given.
func (l *Loopback) VolumeGroups(ctx context.Context) ([]VolumeGroup, error) {
	vgs, err := l.LVM.VolumeGroups(ctx)
	if err != nil {
		return nil, err
	}
	for i := range vgs {
		recs, err := l.records(vgs[i].Name)
		if err != nil {
			return nil, err
		}
		var used uint64
		for _, r := range recs {
			used += allocated(r)
		}
		vgs[i].Free -= min(used, vgs[i].Free)
	}
	return vgs, nil
}

// allocated is the group space a volume takes: thin volumes take theirs
// from their pool.
func allocated(r record) uint64 {
	switch r.Kind {
	case Thick:
		return r.Size
	case ThinPool:
		return r.Size + r.MetadataSize
	default:
		return 0
	}
}

// CreatePhysicalVolume implements Manager.
func (l *Loopback) CreatePhysicalVolume(ctx context.Context, device string) error {
	return l.LVM.CreatePhysicalVolume(ctx, device)
}

// CreateVolumeGroup implements Manager.
func (l *Loopback) CreateVolumeGroup(ctx context.Context, name string, devices, tags []string) error {
	return l.LVM.CreateVolumeGroup(ctx, name, devices, tags)
}

// ExtendVolumeGroup implements Manager.
func (l *Loopback) ExtendVolumeGroup(ctx context.Context, name string, devices []string) error {
	return l.LVM.ExtendVolumeGroup(ctx, name, devices)
}

// RemoveVolumeGroup implements Manager: every volume's loop device and
// file go, then the real group and its labels. A crash in between leaves
// a group with fewer files, which a retry finishes removing.
func (l *Loopback) RemoveVolumeGroup(ctx context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := FindVolumeGroupOf(ctx, l, name); err != nil {
		return err
	}
	dir := filepath.Join(l.Dir, name)
	if err := loopdev.DetachUnder(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return l.LVM.RemoveVolumeGroup(ctx, name)
}

// LogicalVolumes implements Manager.
func (l *Loopback) LogicalVolumes(_ context.Context, vg string) ([]LogicalVolume, error) {
	recs, err := l.records(vg)
	if err != nil {
		return nil, err
	}
	lvs := make([]LogicalVolume, 0, len(recs))
	for _, r := range recs {
		lvs = append(lvs, l.logicalVolume(vg, r, recs))
	}
	return lvs, nil
}

// findVolume reads one volume's record, not the whole group's: FindVolume
// uses it, so that a lookup costs the same with ten volumes or a thousand.
func (l *Loopback) findVolume(_ context.Context, vg, name string) (LogicalVolume, error) {
	r, err := l.record(vg, name)
	if err != nil {
		return LogicalVolume{}, err
	}
	var recs []record
	if r.Kind == ThinPool {
		if recs, err = l.records(vg); err != nil {
			return LogicalVolume{}, err
		}
	}
	return l.logicalVolume(vg, r, recs), nil
}

// logicalVolume describes a record; a pool's usage needs the group's
// other records.
func (l *Loopback) logicalVolume(vg string, r record, recs []record) LogicalVolume {
	lv := LogicalVolume{Name: r.Name, VolumeGroup: vg, Size: r.Size, Kind: r.Kind, Pool: r.Pool, Origin: r.Origin,
		Tags: r.Tags, MetadataSize: r.MetadataSize}
	if r.Kind == ThinPool {
		lv.DataPercent, lv.MetadataPercent = l.poolUsage(vg, r, recs)
	}
	return lv
}

// poolUsage is how full a pool is: the bytes its volumes' files really
// occupy, and the metadata their mapped chunks would take.
func (l *Loopback) poolUsage(vg string, pool record, recs []record) (data, metadata float64) {
	var used, volumes uint64
	for _, r := range recs {
		if r.Kind != Thin || r.Pool != pool.Name {
			continue
		}
		volumes++
		var st syscall.Stat_t
		if err := syscall.Stat(l.image(vg, r.Name), &st); err == nil {
			used += uint64(st.Blocks) * 512
		}
	}
	chunks := (used + pool.ChunkSize - 1) / pool.ChunkSize
	data = 100 * float64(used) / float64(pool.Size)
	metadata = 100 * float64(chunks*thinMetadataPerChunk+volumes*4096) / float64(pool.MetadataSize)
	return min(data, 100), min(metadata, 100)
}

// CreateThinPool implements Manager.
func (l *Loopback) CreateThinPool(ctx context.Context, vg string, pool ThinPoolSpec) error {
	defer l.lock(vg, pool.Name, true)()
	r := record{Name: pool.Name, Kind: ThinPool, Size: pool.Size, MetadataSize: pool.MetadataSize, ChunkSize: pool.ChunkSize}
	if r.ChunkSize == 0 {
		r.ChunkSize = defaultChunkSize
	}
	if r.MetadataSize == 0 {
		r.MetadataSize = max(thinMetadataMin, r.Size/r.ChunkSize*thinMetadataPerChunk)
	}
	if err := checkNew(ctx, l, vg, pool.Name, r.Size+r.MetadataSize); err != nil {
		return err
	}
	return l.writeRecord(vg, r)
}

// ExtendThinPool implements Manager.
func (l *Loopback) ExtendThinPool(ctx context.Context, vg, pool string, size, metadataSize uint64) error {
	defer l.lock(vg, pool, true)()
	r, err := l.record(vg, pool)
	if err != nil {
		return err
	}
	if r.Kind != ThinPool {
		return named(ErrNotFound, "thin pool %s/%s (it is a %s volume)", vg, pool, r.Kind)
	}
	if err := checkGrowth(LogicalVolume{Name: pool, VolumeGroup: vg, Size: r.Size, MetadataSize: r.MetadataSize}, size, metadataSize); err != nil {
		return err
	}
	grown := r
	grown.Size, grown.MetadataSize = max(r.Size, size), max(r.MetadataSize, metadataSize)
	group, err := FindVolumeGroupOf(ctx, l, vg)
	if err != nil {
		return err
	}
	if need := allocated(grown) - allocated(r); need > group.Free {
		return named(ErrNoSpace, "volume group %s has %d bytes free, growing thin pool %s needs %d", vg, group.Free, pool, need)
	}
	return l.writeRecord(vg, grown)
}

// CreateVolume implements Manager. The file comes first and the record
// last: a crash in between leaves a file no record claims, which a retry
// reuses.
func (l *Loopback) CreateVolume(ctx context.Context, vg string, spec VolumeSpec) error {
	defer l.lock(vg, spec.Name, spec.Pool == "")()
	r := record{Name: spec.Name, Kind: Thick, Size: spec.Size, Pool: spec.Pool, Tags: spec.Tags}
	if spec.Pool == "" {
		if err := checkNew(ctx, l, vg, spec.Name, spec.Size); err != nil {
			return err
		}
	} else {
		r.Kind = Thin
		if err := checkNewThin(ctx, l, vg, spec.Name, spec.Pool); err != nil {
			return err
		}
	}
	if err := l.createImage(ctx, vg, spec.Name, spec.Size); err != nil {
		return err
	}
	return l.writeRecord(vg, r)
}

// CreateSnapshot implements Manager: a copy of the origin's file, written
// under a temporary name, then the record.
func (l *Loopback) CreateSnapshot(ctx context.Context, vg, name, origin string, tags []string) error {
	defer l.lock(vg, name, false)()
	if err := checkSnapshot(ctx, l, vg, name, origin); err != nil {
		return err
	}
	from, err := l.record(vg, origin)
	if err != nil {
		return err
	}
	thaw, err := l.quiesce(ctx, l.image(vg, origin))
	if err != nil {
		return err
	}
	defer thaw()
	tmp := l.image(vg, name) + ".tmp"
	if _, err := l.Runner.Run(ctx, "cp", "--reflink=auto", "--sparse=always", l.image(vg, origin), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, l.image(vg, name)); err != nil {
		return err
	}
	if err := l.activate(ctx, l.image(vg, name)); err != nil {
		return err
	}
	return l.writeRecord(vg, record{Name: name, Kind: Thin, Size: from.Size, Pool: from.Pool, Origin: origin, Tags: tags})
}

// ResizeVolume implements Manager: the file grows, then an attached loop
// device is told its new capacity, then the record.
func (l *Loopback) ResizeVolume(ctx context.Context, vg, name string, size uint64) error {
	defer l.lock(vg, name, l.takesSpace(vg, name))()
	grow, err := checkResize(ctx, l, vg, name, size)
	if err != nil || !grow {
		return err
	}
	r, err := l.record(vg, name)
	if err != nil {
		return err
	}
	if err := os.Truncate(l.image(vg, name), int64(size)); err != nil {
		return err
	}
	if dev, err := l.attached(ctx, l.image(vg, name)); err != nil {
		return err
	} else if dev != "" {
		if _, err := l.Runner.Run(ctx, "losetup", "--set-capacity", dev); err != nil {
			return err
		}
	}
	r.Size = size
	return l.writeRecord(vg, r)
}

// RemoveVolume implements Manager: the loop device goes, then the file,
// then the record; a crash in between leaves a record a retry removes.
func (l *Loopback) RemoveVolume(ctx context.Context, vg, name string) error {
	defer l.lock(vg, name, l.takesSpace(vg, name))()
	if err := checkRemove(ctx, l, vg, name); err != nil {
		return err
	}
	img := l.image(vg, name)
	if dev, err := l.attached(ctx, img); err != nil {
		return err
	} else if dev != "" {
		if _, err := l.Runner.Run(ctx, "losetup", "--detach", dev); err != nil {
			return err
		}
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(l.recordPath(vg, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// DevicePath implements Manager: the loop device of the volume's file,
// attached now if it is not yet.
func (l *Loopback) DevicePath(ctx context.Context, vg, name string) (string, error) {
	defer l.lock(vg, name, false)()
	r, err := l.record(vg, name)
	if err != nil {
		return "", err
	}
	if r.Kind == ThinPool {
		return "", named(ErrNotFound, "device of %s/%s: a thin pool has none", vg, name)
	}
	img := l.image(vg, name)
	if _, err := os.Stat(img); err != nil {
		return "", fmt.Errorf("logical volume %s/%s has no file %s (a removal was interrupted; remove it again): %w", vg, name, img, err)
	}
	if dev, err := l.attached(ctx, img); err != nil || dev != "" {
		return dev, err
	}
	if err := l.activate(ctx, img); err != nil {
		return "", err
	}
	return l.attached(ctx, img)
}

// quiesce makes the origin's file hold everything written to it, as
// lvm2 does by suspending the origin (which freezes a filesystem on it):
// a filesystem mounted from its loop device is frozen until thaw, so its
// cached writes reach the file and none start during the copy; an
// unmounted device's cache is flushed.
func (l *Loopback) quiesce(ctx context.Context, file string) (thaw func(), err error) {
	dev, err := l.attached(ctx, file)
	if err != nil || dev == "" {
		return func() {}, err
	}
	if mountpoint, err := mountpointOf(dev); err != nil {
		return nil, err
	} else if mountpoint != "" {
		if _, err := l.Runner.Run(ctx, "fsfreeze", "--freeze", mountpoint); err != nil {
			return nil, err
		}
		return func() { _, _ = l.Runner.Run(context.WithoutCancel(ctx), "fsfreeze", "--unfreeze", mountpoint) }, nil
	}
	f, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return func() {}, f.Sync()
}

// mountpointOf returns one place device is mounted, or "".
func mountpointOf(device string) (string, error) {
	points, err := mountinfo.Read()
	if err != nil {
		return "", err
	}
	for _, p := range points {
		if p.Source == device {
			return p.MountPoint, nil
		}
	}
	return "", nil
}
