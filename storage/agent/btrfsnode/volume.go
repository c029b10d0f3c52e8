package btrfsnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/btrfs"
)

var compressionLevels = map[string]int{"": 0, "zstd": 15, "zlib": 9, "lzo": 0}

// checkTuning refuses tuning the filesystem would refuse, before anything is made.
func checkTuning(t Tuning) error {
	top, ok := compressionLevels[t.Compression]
	switch {
	case !ok:
		return contract.Invalidf("compression %q: use zstd, lzo or zlib, or none", t.Compression)
	case t.CompressionLevel < 0 || t.CompressionLevel > top:
		if top == 0 {
			return contract.Invalidf("compression level %d: %s takes no level", t.CompressionLevel, orNone(t.Compression))
		}
		return contract.Invalidf("compression level %d: %s takes 1-%d", t.CompressionLevel, t.Compression, top)
	case t.NoCOW && t.Compression != "":
		return contract.Invalidf("nocow and compression %s: btrfs compresses only copy-on-write data; pick one", t.Compression)
	case t.UID != nil && *t.UID < 0, t.GID != nil && *t.GID < 0:
		return contract.Invalidf("uid and gid must not be negative")
	}
	_, err := tuningMode(t)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "no compression"
	}
	return s
}

func tuningMode(t Tuning) (uint32, error) {
	if t.Mode == "" {
		return 0o755, nil
	}
	m, err := strconv.ParseUint(t.Mode, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, contract.Invalidf("mode %q is not an octal permission such as 0755", t.Mode)
	}
	return uint32(m), nil
}

// Create makes a volume. Repeating a create returns the volume made
// before when the size matches; another size is a contract.Conflict. created says
// whether this call made it.
func (s *Store) Create(ctx context.Context, tenant string, req CreateRequest) (v Volume, created bool, err error) {
	if err := s.checkNew("volume", req.Name, req.SizeBytes); err != nil {
		return Volume{}, false, err
	}
	if err := checkTuning(req.Tuning); err != nil {
		return Volume{}, false, err
	}
	defer s.locks.lock(tenant + "/" + req.Name)()
	defer s.commitDurably(&err)
	if have, err := s.get(tenant, req.Name); err == nil {
		if have.SizeBytes != req.SizeBytes {
			return Volume{}, false, contract.Errorf(contract.Conflict, "volume %s exists with %d bytes, not %d", req.Name, have.SizeBytes, req.SizeBytes)
		}
		return have, false, nil
	} else if contract.KindOf(err) != contract.NotFound {
		return Volume{}, false, err
	}
	if err := s.checkRoom(req.Name, req.SizeBytes); err != nil {
		return Volume{}, false, err
	}
	release, err := s.reserveVolume(tenant, req.Name, req.SizeBytes)
	if err != nil {
		return Volume{}, false, err
	}
	defer release()
	dir := s.volumeDir(tenant, req.Name)
	if err := s.prepareDir(dir); err != nil {
		return Volume{}, false, err
	}
	groups, err := s.tenantGroups(ctx, tenant)
	if err != nil {
		return Volume{}, false, err
	}
	if err := s.FS.CreateSubvolume(ctx, filepath.Join(dir, dataDir), groups...); err != nil {
		return Volume{}, false, err
	}
	v = Volume{Name: req.Name, SizeBytes: req.SizeBytes, CreatedAt: time.Now().UTC()}
	if err := s.apply(ctx, dir, &v, req.Tuning, true); err != nil {
		return Volume{}, false, err
	}
	if err := recordNew(dir, recordOfVolume(v)); err != nil {
		return Volume{}, false, err
	}
	s.recordedSize(tenant, v.Name, v.SizeBytes)
	return s.fill(tenant, v), true, nil
}

// checkNew checks a new volume's or snapshot's name and size.
func (s *Store) checkNew(kind, name string, size int64) error {
	if err := contract.CheckName(kind, name); err != nil {
		return err
	}
	if size < s.MinSize {
		return contract.Invalidf("%s %s: size %d bytes is below the minimum of %d", kind, name, size, s.MinSize)
	}
	return nil
}

// checkRoom refuses a size the filesystem has no free space for.
func (s *Store) checkRoom(name string, size int64) error {
	_, free, err := btrfs.Free(s.Base)
	if err != nil {
		return err
	}
	if size > free {
		return contract.Errorf(contract.NoSpace, "volume %s: %d bytes asked, the filesystem has %d free", name, size, free)
	}
	return nil
}

// prepareDir makes a volume's or snapshot's directory, first moving
// what a crashed create or delete left there to quarantine.
func (s *Store) prepareDir(dir string) error {
	if err := s.quarantine(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// removeDir removes a volume's or snapshot's directory with its
// subvolume. It is never called while the metadata exists.
func (s *Store) removeDir(ctx context.Context, dir string) error {
	if err := s.deleteIfSubvolume(ctx, filepath.Join(dir, dataDir)); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// apply sets a volume's limit and tuning; the owner and mode only on a
// new volume, and No_COW only on an empty one, as btrfs requires.
func (s *Store) apply(ctx context.Context, dir string, v *Volume, t Tuning, fresh bool) error {
	data := filepath.Join(dir, dataDir)
	if err := s.FS.SetLimit(ctx, data, v.SizeBytes); err != nil {
		return err
	}
	if err := s.FS.SetCompression(ctx, data, t.Compression, t.CompressionLevel); err != nil {
		return err
	}
	v.Compression, v.CompressionLevel = t.Compression, t.CompressionLevel
	if !fresh {
		return nil
	}
	if t.NoCOW {
		if err := btrfs.SetNoCOW(data); err != nil {
			return err
		}
		v.NoCOW = true
	}
	mode, _ := tuningMode(t)
	v.UID, v.GID, v.Mode = deref(t.UID), deref(t.GID), fmt.Sprintf("%04o", mode)
	if err := os.Chown(data, v.UID, v.GID); err != nil {
		return err
	}
	// unix.Chmod keeps the setgid bit a shared directory wants.
	return unix.Chmod(data, mode)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// Get returns one volume.
func (s *Store) Get(tenant, name string) (Volume, error) {
	if err := contract.CheckName("volume", name); err != nil {
		return Volume{}, err
	}
	return s.get(tenant, name)
}

func (s *Store) get(tenant, name string) (Volume, error) {
	var rec volumeRecord
	if err := readMetadata(s.volumeDir(tenant, name), "volume "+name, &rec); err != nil {
		return Volume{}, err
	}
	return s.fill(tenant, rec.volume()), nil
}

// fill adds what is not stored: where the volume is and what it holds.
func (s *Store) fill(tenant string, v Volume) Volume {
	v.Path = filepath.Join(s.volumeDir(tenant, v.Name), dataDir)
	v.Node = s.Node
	if u, err := s.FS.Usage(v.Path); err == nil {
		v.UsedBytes = u.Referenced
	}
	if len(v.Clients) > 0 && s.Exporter != nil {
		v.ExportPath = s.Exporter.MountPath(s.export(tenant, v))
	}
	return v
}

// List returns a tenant's volumes by name.
func (s *Store) List(tenant string) ([]Volume, error) {
	vs, err := s.records(tenant)
	for i := range vs {
		vs[i] = s.fill(tenant, vs[i])
	}
	return vs, err
}

// records reads a tenant's volumes' metadata alone.
func (s *Store) records(tenant string) ([]Volume, error) {
	names, err := listDirs(filepath.Join(s.Base, tenant))
	if err != nil {
		return nil, err
	}
	volumes := []Volume{}
	for _, n := range names {
		if n == contract.SnapshotsDir || strings.HasPrefix(n, ".") {
			continue
		}
		var rec volumeRecord
		err := readMetadata(s.volumeDir(tenant, n), "volume "+n, &rec)
		v := rec.volume()
		if contract.KindOf(err) == contract.NotFound { // half-made or half-removed
			continue
		}
		if err != nil {
			return nil, err
		}
		volumes = append(volumes, v)
	}
	return volumes, nil
}

// Update expands or retunes a volume. A volume never shrinks: data that
// does not fit a smaller quota would be stranded.
func (s *Store) Update(ctx context.Context, tenant, name string, req UpdateRequest) (Volume, error) {
	if err := contract.CheckName("volume", name); err != nil {
		return Volume{}, err
	}
	defer s.locks.lock(tenant + "/" + name)()
	defer s.quotaLock(tenant)()
	v, err := s.get(tenant, name)
	if err != nil {
		return Volume{}, err
	}
	size := v.SizeBytes
	if req.SizeBytes != nil {
		size = *req.SizeBytes
	}
	if size < v.SizeBytes {
		return Volume{}, contract.Invalidf("volume %s: cannot shrink from %d to %d bytes", name, v.SizeBytes, size)
	}
	if size > v.SizeBytes {
		if err := s.checkRoom(name, size-v.SizeBytes); err != nil {
			return Volume{}, err
		}
		if err := s.checkVolumeQuota(tenant, name, size); err != nil {
			return Volume{}, err
		}
	}
	t := Tuning{Compression: v.Compression, CompressionLevel: v.CompressionLevel, NoCOW: v.NoCOW}
	if req.Compression != nil {
		t.Compression, t.CompressionLevel = *req.Compression, 0
	}
	if req.CompressionLevel != nil {
		t.CompressionLevel = *req.CompressionLevel
	}
	if err := checkTuning(t); err != nil {
		return Volume{}, err
	}
	v.SizeBytes = size
	dir := s.volumeDir(tenant, name)
	if err := s.apply(ctx, dir, &v, t, false); err != nil {
		return Volume{}, err
	}
	if err := writeMetadata(dir, recordOfVolume(v)); err != nil {
		return Volume{}, err
	}
	s.recordedSize(tenant, name, v.SizeBytes)
	return s.fill(tenant, v), nil
}

// Delete removes a volume. One with snapshots or exports is refused
// (contract.InUse) unless cascade is set; then they go first.
func (s *Store) Delete(ctx context.Context, tenant, name string, cascade bool) (err error) {
	if err := contract.CheckName("volume", name); err != nil {
		return err
	}
	defer s.locks.lock(tenant + "/" + name)()
	defer s.commitDurably(&err)
	v, err := s.get(tenant, name)
	if err != nil {
		return err
	}
	snaps, err := s.ListSnapshots(tenant, name)
	if err != nil {
		return err
	}
	if !cascade && (len(snaps) > 0 || len(v.Clients) > 0) {
		return contract.Errorf(contract.InUse, "volume %s %s; remove them first, or delete with cascade", name, dependents(snaps, v.Clients))
	}
	for _, snap := range snaps {
		unlock := s.lockSnapshot(tenant, snap.Name)
		err := s.deleteSnapshot(ctx, tenant, snap.Name)
		unlock()
		if err != nil {
			return err
		}
	}
	if len(v.Clients) > 0 {
		if _, err := s.setClients(ctx, tenant, v, nil); err != nil {
			return err
		}
	}
	dir := s.volumeDir(tenant, name)
	if err := removeRecord(dir); err != nil {
		return err
	}
	s.recordedSize(tenant, name, 0)
	return s.removeDir(ctx, dir)
}

func dependents(snaps []Snapshot, clients []string) string {
	var parts []string
	if len(snaps) > 0 {
		var names []string
		for _, s := range snaps {
			names = append(names, s.Name)
		}
		parts = append(parts, fmt.Sprintf("has %d snapshot(s) (%s)", len(snaps), strings.Join(names, ", ")))
	}
	if len(clients) > 0 {
		parts = append(parts, "is exported to "+strings.Join(clients, ", "))
	}
	return strings.Join(parts, " and ")
}
