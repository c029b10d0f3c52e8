package lvmnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/blockdelta"
	"github.com/strata-gitops/strata/storage/lvm"
)

// SnapshotForSend takes the next replica of the pair's volume, a thin
// snapshot, given the replicas the peer holds; its stream is the block
// delta from the newest replica both sides hold, or the whole volume.
// The loopback volume manager freezes a mounted filesystem while it
// copies, and a thin snapshot is taken at one instant, so the replica is
// crash-consistent.
func (s *Store) SnapshotForSend(ctx context.Context, tenant, name string, peerHolds []uint64) (replicas.Outgoing, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return replicas.Outgoing{}, err
	}
	defer s.lock(tenant, name)()
	vg := rec.Group
	if _, err := s.thinVolume(ctx, vg, rec.Volume); err != nil {
		return replicas.Outgoing{}, err
	}
	have, err := s.clearIncomplete(ctx, tenant, rec)
	if err != nil {
		return replicas.Outgoing{}, err
	}
	out := replicas.Outgoing{MadeAt: time.Now().UTC()}
	var stale []uint64
	out.Seq, out.Parent, stale = replicas.Next(have, peerHolds)
	for _, seq := range stale {
		if err := s.removeReplica(ctx, tenant, rec, seq); err != nil {
			return replicas.Outgoing{}, err
		}
	}
	snapshot := replicaName(rec.Volume, out.Seq)
	if err := s.LVM.CreateSnapshot(ctx, vg, snapshot, rec.Volume, []string{replicaTag + name}); err != nil {
		return replicas.Outgoing{}, err
	}
	if err := s.recordReplica(tenant, name, out.Seq, replicaRecord{Parent: out.Parent, MadeAt: out.MadeAt}); err != nil {
		return replicas.Outgoing{}, err
	}
	base := ""
	if out.Parent != 0 {
		base = replicaName(rec.Volume, out.Parent)
	}
	out.Stream = func(ctx context.Context, w io.Writer) error {
		_, err := s.diff(ctx, w, vg, base, snapshot)
		return err
	}
	return out, nil
}

// diff writes the block delta from volume base (none: the whole volume)
// to volume next.
func (s *Store) diff(ctx context.Context, w io.Writer, vg, base, next string) (blockdelta.Stats, error) {
	nextDev, size, err := s.open(ctx, vg, next, os.O_RDONLY)
	if err != nil {
		return blockdelta.Stats{}, err
	}
	defer nextDev.Close()
	var baseDev io.ReaderAt
	if base != "" {
		f, baseSize, err := s.open(ctx, vg, base, os.O_RDONLY)
		if err != nil {
			return blockdelta.Stats{}, err
		}
		defer f.Close()
		switch {
		case baseSize < size:
			// The volume grew since the base: the delta covers the new
			// size, and the receiver grows its copy of the base first.
			baseDev = paddedReader{f, baseSize}
		case baseSize > size:
			return blockdelta.Stats{}, fmt.Errorf("volume %s/%s is smaller than its base %s: a volume never shrinks", vg, next, base)
		default:
			baseDev = f
		}
	}
	return blockdelta.Diff(w, baseDev, nextDev, size, 0)
}

// paddedReader reads zeros past its size, as a grown volume reads in its
// new part.
type paddedReader struct {
	r    io.ReaderAt
	size int64
}

func (p paddedReader) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	if off < p.size {
		var err error
		n, err = p.r.ReadAt(b[:min(int64(len(b)), p.size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return n, err
		}
	}
	clear(b[n:])
	return len(b), nil
}

// open opens a volume's block device and says its size.
func (s *Store) open(ctx context.Context, vg, name string, flag int) (*os.File, int64, error) {
	dev, err := s.LVM.DevicePath(ctx, vg, name)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(dev, flag, 0)
	if err != nil {
		return nil, 0, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("the size of %s (volume %s/%s): %w", dev, vg, name, err)
	}
	return f, size, nil
}

// Sent records that the peer holds replica seq: older ones are no longer
// anyone's parent.
func (s *Store) Sent(ctx context.Context, tenant, name string, seq uint64) error {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return err
	}
	defer s.lock(tenant, name)()
	return s.pruneBefore(ctx, tenant, rec, seq)
}

// Receive makes replica seq of the pair from a block delta stream built
// on replica parent (0: a whole stream) into a new thin volume: a
// snapshot of the parent, or a blank volume in the pair volume's pool.
// whole says, once the stream has ended, whether every byte the peer
// sent arrived; only then, with the volume flushed, is the replica
// recorded. Older replicas are removed after.
func (s *Store) Receive(ctx context.Context, tenant, name string, seq, parent uint64, madeAt time.Time, r io.Reader, whole func() error) (wire.Pair, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return wire.Pair{}, err
	}
	defer s.lock(tenant, name)()
	volume, err := s.thinVolume(ctx, rec.Group, rec.Volume)
	if err != nil {
		return wire.Pair{}, err
	}
	have, err := s.clearIncomplete(ctx, tenant, rec)
	if err != nil {
		return wire.Pair{}, err
	}
	if !replicas.Follows(have, seq, parent) {
		return wire.Pair{}, &contract.Error{Kind: contract.Conflict, Message: fmt.Sprintf(
			"pair %s holds replicas %v; a stream of replica %d from parent %d does not follow them", name, have, seq, parent)}
	}
	err = s.receiveInto(ctx, rec, volume, seq, parent, r, whole)
	if err == nil {
		err = s.recordReplica(tenant, name, seq, replicaRecord{Parent: parent, MadeAt: madeAt})
	}
	if err != nil {
		kept := "no replica is kept"
		if len(have) > 0 {
			kept = fmt.Sprintf("replica %d is kept", have[len(have)-1])
		}
		return wire.Pair{}, errors.Join(fmt.Errorf("pair %s, replica %d: %w; %s", name, seq, err, kept),
			s.removeReplica(ctx, tenant, rec, seq))
	}
	if err := s.pruneBefore(ctx, tenant, rec, seq); err != nil {
		return wire.Pair{}, err
	}
	return s.pairState(ctx, tenant, rec)
}

// receiveInto makes the replica's volume and writes the stream onto it.
func (s *Store) receiveInto(ctx context.Context, rec pairRecord, volume lvm.LogicalVolume, seq, parent uint64, r io.Reader, whole func() error) error {
	vg, target := rec.Group, replicaName(rec.Volume, seq)
	tags := []string{replicaTag + rec.Name}
	var err error
	if parent != 0 {
		err = s.LVM.CreateSnapshot(ctx, vg, target, replicaName(rec.Volume, parent), tags)
	} else {
		err = s.LVM.CreateVolume(ctx, vg, lvm.VolumeSpec{Name: target, Size: volume.Size, Pool: volume.Pool, Tags: tags})
	}
	if err != nil {
		return err
	}
	if err := s.growTo(ctx, vg, target, volume.Size); err != nil {
		return err
	}
	f, size, err := s.open(ctx, vg, target, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := blockdelta.Apply(r, f, size); err != nil {
		return err
	}
	if err := whole(); err != nil {
		return err
	}
	return f.Sync()
}

// growTo grows a replica volume to the pair volume's size, which the
// stream may need when the source volume grew since the parent.
func (s *Store) growTo(ctx context.Context, vg, name string, size uint64) error {
	lv, err := lvm.FindVolume(ctx, s.LVM, vg, name)
	if err != nil || lv.Size >= size {
		return err
	}
	return s.LVM.ResizeVolume(ctx, vg, name, size)
}

// pruneBefore removes the complete replicas older than seq.
func (s *Store) pruneBefore(ctx context.Context, tenant string, rec pairRecord, seq uint64) error {
	have, err := s.complete(ctx, tenant, rec)
	if err != nil {
		return err
	}
	for _, old := range have {
		if old < seq {
			if err := s.removeReplica(ctx, tenant, rec, old); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearIncomplete removes what a crash or a cut stream left (replica
// volumes without a record, records without a volume) and returns the
// complete replicas, oldest first.
func (s *Store) clearIncomplete(ctx context.Context, tenant string, rec pairRecord) ([]uint64, error) {
	recorded, present, err := s.scan(ctx, tenant, rec)
	if err != nil {
		return nil, err
	}
	for _, seq := range slices.Concat(recorded, present) {
		if slices.Contains(recorded, seq) != slices.Contains(present, seq) {
			if err := s.removeReplica(ctx, tenant, rec, seq); err != nil {
				return nil, err
			}
		}
	}
	return intersect(recorded, present), nil
}

// removeReplica removes a replica's record, durably, then its volume: a
// crash between leaves a volume without a record, which is incomplete
// and goes with the next sync.
func (s *Store) removeReplica(ctx context.Context, tenant string, rec pairRecord, seq uint64) error {
	err := os.Remove(s.replicaRecordPath(tenant, rec.Name, seq))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(s.pairDir(tenant, rec.Name)); err != nil {
		return err
	}
	err = s.LVM.RemoveVolume(ctx, rec.Group, replicaName(rec.Volume, seq))
	if errors.Is(err, lvm.ErrNotFound) {
		return nil
	}
	return err
}
