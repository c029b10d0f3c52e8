package lvmnode

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/mountinfo"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/blockdelta"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Promote makes the pair's volume hold its newest complete replica: the
// chunks that differ are written onto the volume, which keeps its name,
// its device and its LogicalVolume. A volume that is mounted is refused,
// as writing under a filesystem would corrupt it. A promotion cut short
// leaves the volume part old, part new; the failover controller starts
// nothing on it until a promotion has returned, and promoting again
// finishes the job. A fenced volume is writable again after it: its data
// is now the replica's, which is what the pair serves.
func (s *Store) Promote(ctx context.Context, tenant, name string) (wire.Volume, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return wire.Volume{}, err
	}
	defer s.lock(tenant, name)()
	vg := rec.Group
	state, err := s.pairState(ctx, tenant, rec)
	if err != nil {
		return wire.Volume{}, err
	}
	if state.Latest == 0 {
		return wire.Volume{}, &contract.Error{Kind: contract.NotFound, Message: fmt.Sprintf("pair %s holds no complete replica to promote", name)}
	}
	newest, err := lvm.FindVolume(ctx, s.LVM, vg, replicaName(rec.Volume, state.Latest))
	if err != nil {
		return wire.Volume{}, err
	}
	// The primary's volume may have grown since this side's volume was
	// made: the replica is as large as it was.
	if err := s.growTo(ctx, vg, rec.Volume, newest.Size); err != nil {
		return wire.Volume{}, err
	}
	dev, rdev, err := s.device(ctx, vg, rec.Volume)
	if err != nil {
		return wire.Volume{}, err
	}
	if where, err := mountedAt(rdev); err != nil || where != "" {
		if err == nil {
			err = &contract.Error{Kind: contract.InUse, Message: fmt.Sprintf(
				"volume %s/%s of pair %s is mounted at %s: stop what uses it before promoting", vg, rec.Volume, name, where)}
		}
		return wire.Volume{}, err
	}
	if err := run(ctx, "blockdev", "--setrw", dev); err != nil {
		return wire.Volume{}, err
	}
	if err := s.recordFence(tenant, name, false); err != nil {
		return wire.Volume{}, err
	}
	target, size, err := s.open(ctx, vg, rec.Volume, os.O_RDWR)
	if err != nil {
		return wire.Volume{}, err
	}
	defer target.Close()
	replica, _, err := s.open(ctx, vg, replicaName(rec.Volume, state.Latest), os.O_RDONLY)
	if err != nil {
		return wire.Volume{}, err
	}
	defer replica.Close()
	// The delta from the volume to the replica, applied onto the volume:
	// Apply writes only what Diff has read already, as it reads behind it.
	r, w := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		_, err := blockdelta.Diff(w, target, replica, size, 0)
		w.CloseWithError(err)
		sent <- err
	}()
	_, applyErr := blockdelta.Apply(r, target, size)
	r.Close()
	if err := firstOf(<-sent, applyErr, target.Sync()); err != nil {
		return wire.Volume{}, fmt.Errorf("volume %s/%s: promoting replica %d of pair %s: %w; promote again to finish", vg, rec.Volume, state.Latest, name, err)
	}
	return s.volume(ctx, vg, rec.Volume)
}

// mountedAt says where the block device rdev is mounted, if anywhere.
func mountedAt(rdev uint64) (string, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if uint32(m.Major) == unix.Major(rdev) && uint32(m.Minor) == unix.Minor(rdev) {
			return filepath.Clean(m.MountPoint), nil
		}
	}
	return "", nil
}

func firstOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
