package lvmpairs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/mountinfo"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/agent/volumes"
	"github.com/strata-gitops/strata/storage/blockdelta"
)

// Promote makes the pair's volume hold its newest complete replica: the
// chunks that differ are written onto the volume, which keeps its name,
// its device and its LogicalVolume. A volume that is mounted is refused,
// as writing under a filesystem would corrupt it. A promotion cut short
// leaves the volume part old, part new; the failover controller starts
// nothing on it until a promotion has returned, and promoting again
// finishes the job.
func (s *Store) Promote(ctx context.Context, vg, name string) (wire.Pair, error) {
	rec, err := s.pairRecord(vg, name)
	if err != nil {
		return wire.Pair{}, err
	}
	defer s.lock(vg, name)()
	state, err := s.pairState(ctx, vg, rec)
	if err != nil {
		return wire.Pair{}, err
	}
	if state.Latest == 0 {
		return wire.Pair{}, &volumes.Error{Kind: volumes.NotFound, Message: fmt.Sprintf("pair %s holds no complete replica to promote", name)}
	}
	volume, err := s.thinVolume(ctx, vg, rec.Volume)
	if err != nil {
		return wire.Pair{}, err
	}
	if err := s.growTo(ctx, vg, rec.Volume, volume.Size); err != nil {
		return wire.Pair{}, err
	}
	target, size, err := s.open(ctx, vg, rec.Volume, os.O_RDWR)
	if err != nil {
		return wire.Pair{}, err
	}
	defer target.Close()
	if where, err := mountedAt(target); err != nil || where != "" {
		if err == nil {
			err = &volumes.Error{Kind: volumes.InUse, Message: fmt.Sprintf(
				"volume %s/%s of pair %s is mounted at %s: stop what uses it before promoting", vg, rec.Volume, name, where)}
		}
		return wire.Pair{}, err
	}
	replica, _, err := s.open(ctx, vg, replicaName(rec.Volume, state.Latest), os.O_RDONLY)
	if err != nil {
		return wire.Pair{}, err
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
		return wire.Pair{}, fmt.Errorf("volume %s/%s: promoting replica %d of pair %s: %w; promote again to finish", vg, rec.Volume, state.Latest, name, err)
	}
	return state, nil
}

// mountedAt says where the block device f is mounted, if anywhere.
func mountedAt(f *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if uint32(m.Major) == unix.Major(st.Rdev) && uint32(m.Minor) == unix.Minor(st.Rdev) {
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
