package btrfsnode

import (
	"context"
	"path/filepath"
	"time"

	"github.com/strata-gitops/strata/storage/agent/contract"
)

// CreateSnapshot makes a read-only snapshot. Repeating it returns the
// snapshot made before when it is of the same volume.
func (s *Store) CreateSnapshot(ctx context.Context, tenant string, req SnapshotRequest) (snap Snapshot, created bool, err error) {
	if err := contract.CheckName("snapshot", req.Name); err != nil {
		return Snapshot{}, false, err
	}
	if err := contract.CheckName("volume", req.Volume); err != nil {
		return Snapshot{}, false, err
	}
	// The volume first, then the snapshot: the order Delete takes them in.
	defer s.locks.lock(tenant + "/" + req.Volume)()
	defer s.lockSnapshot(tenant, req.Name)()
	defer s.commitDurably(&err)
	defer s.quotaLock(tenant)()
	if have, err := s.getSnapshot(tenant, req.Name); err == nil {
		if have.Volume != req.Volume {
			return Snapshot{}, false, contract.Errorf(contract.Conflict, "snapshot %s exists, of volume %s", req.Name, have.Volume)
		}
		return have, false, nil
	} else if contract.KindOf(err) != contract.NotFound {
		return Snapshot{}, false, err
	}
	v, err := s.get(tenant, req.Volume)
	if err != nil {
		return Snapshot{}, false, err
	}
	if err := s.checkSnapshotQuota(tenant, v.SizeBytes); err != nil {
		return Snapshot{}, false, err
	}
	dir := s.snapshotDir(tenant, req.Name)
	if err := s.snapshotTo(ctx, tenant, v.Path, dir, true); err != nil {
		return Snapshot{}, false, err
	}
	snap = Snapshot{Name: req.Name, Volume: req.Volume, SizeBytes: v.SizeBytes, CreatedAt: time.Now().UTC()}
	if err := recordNew(dir, recordOfSnapshot(snap)); err != nil {
		return Snapshot{}, false, err
	}
	return s.fillSnapshot(tenant, snap), true, nil
}

// snapshotTo makes dir, clearing what a crash left there, and a snapshot
// of the subvolume src in it, read-only or writable, in the tenant's quota
// group from the start.
func (s *Store) snapshotTo(ctx context.Context, tenant, src, dir string, readOnly bool) error {
	groups, err := s.tenantGroups(ctx, tenant)
	if err != nil {
		return err
	}
	if err := s.prepareDir(dir); err != nil {
		return err
	}
	return s.FS.Snapshot(ctx, src, filepath.Join(dir, dataDir), readOnly, groups...)
}

// GetSnapshot returns one snapshot.
func (s *Store) GetSnapshot(tenant, name string) (Snapshot, error) {
	if err := contract.CheckName("snapshot", name); err != nil {
		return Snapshot{}, err
	}
	return s.getSnapshot(tenant, name)
}

func (s *Store) getSnapshot(tenant, name string) (Snapshot, error) {
	var rec snapshotRecord
	if err := readMetadata(s.snapshotDir(tenant, name), "snapshot "+name, &rec); err != nil {
		return Snapshot{}, err
	}
	return s.fillSnapshot(tenant, rec.snapshot()), nil
}

func (s *Store) fillSnapshot(tenant string, snap Snapshot) Snapshot {
	snap.Path = filepath.Join(s.snapshotDir(tenant, snap.Name), dataDir)
	if u, err := s.FS.Usage(snap.Path); err == nil {
		snap.UsedBytes = u.Referenced
	}
	return snap
}

// ListSnapshots returns a tenant's snapshots by name, of one volume or,
// when volume is empty, of all.
func (s *Store) ListSnapshots(tenant, volume string) ([]Snapshot, error) {
	names, err := listDirs(filepath.Join(s.Base, tenant, contract.SnapshotsDir))
	if err != nil {
		return nil, err
	}
	snaps := []Snapshot{}
	for _, n := range names {
		snap, err := s.getSnapshot(tenant, n)
		if contract.KindOf(err) == contract.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		if volume == "" || snap.Volume == volume {
			snaps = append(snaps, snap)
		}
	}
	return snaps, nil
}

// DeleteSnapshot removes a snapshot; clones made from it stay.
func (s *Store) DeleteSnapshot(ctx context.Context, tenant, name string) (err error) {
	if err := contract.CheckName("snapshot", name); err != nil {
		return err
	}
	defer s.lockSnapshot(tenant, name)()
	defer s.commitDurably(&err)
	return s.deleteSnapshot(ctx, tenant, name)
}

// deleteSnapshot is DeleteSnapshot without its lock and without waiting
// for the commit: a volume's cascading delete holds the volume's lock and
// removes all its snapshots under its own one commit.
func (s *Store) deleteSnapshot(ctx context.Context, tenant, name string) error {
	dir := s.snapshotDir(tenant, name)
	if _, err := s.getSnapshot(tenant, name); err != nil {
		return err
	}
	if err := removeRecord(dir); err != nil {
		return err
	}
	return s.removeDir(ctx, dir)
}

// Clone makes a volume from a volume or snapshot: a writable btrfs
// snapshot, so it shares the source's data until either is written.
// Repeating it returns the clone made before when source and size match.
func (s *Store) Clone(ctx context.Context, tenant string, req CloneRequest) (v Volume, created bool, err error) {
	if err := contract.CheckName("volume", req.Name); err != nil {
		return Volume{}, false, err
	}
	src, size, err := s.cloneSource(tenant, req)
	if err != nil {
		return Volume{}, false, err
	}
	defer s.locks.lock(tenant + "/" + req.Name)()
	defer s.commitDurably(&err)
	if have, err := s.get(tenant, req.Name); err == nil {
		if have.Source == nil || *have.Source != req.Source || have.SizeBytes != size {
			return Volume{}, false, contract.Errorf(contract.Conflict, "volume %s exists, not as a %d-byte clone of %s", req.Name, size, describe(req.Source))
		}
		return have, false, nil
	} else if contract.KindOf(err) != contract.NotFound {
		return Volume{}, false, err
	}
	if err := s.checkRoom(req.Name, size); err != nil {
		return Volume{}, false, err
	}
	release, err := s.reserveVolume(tenant, req.Name, size)
	if err != nil {
		return Volume{}, false, err
	}
	defer release()
	dir := s.volumeDir(tenant, req.Name)
	if err := s.snapshotTo(ctx, tenant, src.Path, dir, false); err != nil {
		return Volume{}, false, err
	}
	source := req.Source
	v = Volume{Name: req.Name, SizeBytes: size, NoCOW: src.NoCOW, UID: src.UID, GID: src.GID, Mode: src.Mode,
		Source: &source, CreatedAt: time.Now().UTC()}
	if err := s.apply(ctx, dir, &v, Tuning{Compression: src.Compression, CompressionLevel: src.CompressionLevel}, false); err != nil {
		return Volume{}, false, err
	}
	if err := recordNew(dir, recordOfVolume(v)); err != nil {
		return Volume{}, false, err
	}
	s.recordedSize(tenant, v.Name, v.SizeBytes)
	return s.fill(tenant, v), true, nil
}

// cloneSource finds a clone's source and the clone's size: the one
// asked for, or the source's when none was.
func (s *Store) cloneSource(tenant string, req CloneRequest) (Volume, int64, error) {
	var src Volume
	switch {
	case (req.Source.Volume == "") == (req.Source.Snapshot == ""):
		return Volume{}, 0, contract.Invalidf("clone %s: name exactly one source, a volume or a snapshot", req.Name)
	case req.Source.Volume != "":
		if err := contract.CheckName("volume", req.Source.Volume); err != nil {
			return Volume{}, 0, err
		}
		v, err := s.get(tenant, req.Source.Volume)
		if err != nil {
			return Volume{}, 0, err
		}
		src = v
	default:
		if err := contract.CheckName("snapshot", req.Source.Snapshot); err != nil {
			return Volume{}, 0, err
		}
		snap, err := s.getSnapshot(tenant, req.Source.Snapshot)
		if err != nil {
			return Volume{}, 0, err
		}
		// The clone takes the snapshotted volume's tuning when it still exists.
		src, _ = s.get(tenant, snap.Volume)
		src.Path, src.SizeBytes = snap.Path, snap.SizeBytes
	}
	size := req.SizeBytes
	if size == 0 {
		size = src.SizeBytes
	}
	if size < src.SizeBytes {
		return Volume{}, 0, contract.Invalidf("clone %s: %d bytes is smaller than its source %s (%d bytes)", req.Name, size, describe(req.Source), src.SizeBytes)
	}
	return src, size, nil
}

func describe(src Source) string {
	if src.Snapshot != "" {
		return "snapshot " + src.Snapshot
	}
	return "volume " + src.Volume
}

// lockSnapshot takes a snapshot's name lock and returns its release.
func (s *Store) lockSnapshot(tenant, name string) func() {
	return s.locks.lock(tenant + "/" + contract.SnapshotsDir + "/" + name)
}
