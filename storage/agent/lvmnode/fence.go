package lvmnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/internal/command"
	"github.com/strata-gitops/strata/internal/mountinfo"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/lvm"
)

// FencePairs stops every write to the volume of each pair on the node,
// as the btrfs store does: a node that lost touch with the cluster stops
// writing to what it replicates before the other side is promoted. It
// stays so until UnfencePair or a promotion, never by itself. It
// returns the volumes it fenced, as group/volume.
func (s *Store) FencePairs(ctx context.Context) ([]string, error) {
	tenants, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var fenced []string
	var errs []error
	for _, tenant := range tenants {
		pairs, err := os.ReadDir(filepath.Join(s.Dir, tenant.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range pairs {
			volume, err := s.FencePair(ctx, tenant.Name(), p.Name())
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fenced = append(fenced, volume)
		}
	}
	return fenced, errors.Join(errs...)
}

// FencePair fences the volume of one pair and returns its name: the
// block device is made read-only, so nothing opens it for writing again;
// every process that has it, or a file on it, open for writing is
// killed; and the filesystem on it, wherever mounted, is remounted
// read-only. It does not take the pair's lock: a lock held by a stuck
// request must not hold the fence up. The volume is named
// <group>/<volume>.
func (s *Store) FencePair(ctx context.Context, tenant, name string) (string, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return "", err
	}
	// Recorded first: a device's read-only flag is the kernel's and goes
	// with a reboot; the record brings it back (RestoreFences).
	if err := s.recordFence(tenant, name, true); err != nil {
		return "", err
	}
	dev, rdev, err := s.device(ctx, rec.Group, rec.Volume)
	if err != nil {
		return "", err
	}
	if err := run(ctx, "blockdev", "--setro", dev); err != nil {
		return "", err
	}
	if err := replicas.KillWriters(rdev); err != nil {
		return "", err
	}
	return rec.Group + "/" + rec.Volume, remount(rdev, unix.MS_RDONLY)
}

// fencedFile, in a pair's directory, records that its volume is fenced.
const fencedFile = "fenced"

// recordFence writes or removes the pair's fence record, durably.
func (s *Store) recordFence(tenant, name string, fenced bool) error {
	path := filepath.Join(s.pairDir(tenant, name), fencedFile)
	var err error
	if fenced {
		err = atomicfile.Write(path, nil)
	} else if err = os.Remove(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// RestoreFences makes the volume of every pair recorded fenced read-only
// again, as it was before the node restarted: the kernel forgets a
// device's read-only flag at a reboot, and only the controller may lift
// a fence. The agent runs it before it serves anything that could mount
// a volume. A pair whose volume is gone is skipped.
func (s *Store) RestoreFences(ctx context.Context) ([]string, error) {
	marks, err := filepath.Glob(filepath.Join(s.Dir, "*", "*", fencedFile))
	if err != nil {
		return nil, err
	}
	var restored []string
	var errs []error
	for _, mark := range marks {
		pairDir := filepath.Dir(mark)
		rec, err := s.pairRecord(filepath.Base(filepath.Dir(pairDir)), filepath.Base(pairDir))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dev, _, err := s.device(ctx, rec.Group, rec.Volume)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, lvm.ErrNotFound) {
			continue
		}
		if err == nil {
			err = run(ctx, "blockdev", "--setro", dev)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring the fence of %s/%s: %w", rec.Group, rec.Volume, err))
			continue
		}
		restored = append(restored, rec.Group+"/"+rec.Volume)
	}
	return restored, errors.Join(errs...)
}

// UnfencePair makes the pair's volume writable again: the failover
// controller calls it when the node came back before its backup was
// promoted.
func (s *Store) UnfencePair(ctx context.Context, tenant, name string) (wire.Volume, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return wire.Volume{}, err
	}
	defer s.lock(tenant, name)()
	dev, rdev, err := s.device(ctx, rec.Group, rec.Volume)
	if err != nil {
		return wire.Volume{}, err
	}
	if err := run(ctx, "blockdev", "--setrw", dev); err != nil {
		return wire.Volume{}, err
	}
	if err := remount(rdev, 0); err != nil {
		return wire.Volume{}, err
	}
	if err := s.recordFence(tenant, name, false); err != nil {
		return wire.Volume{}, err
	}
	return s.volume(ctx, rec.Group, rec.Volume)
}

// fenced says whether the volume's device is read-only, as a fence
// leaves it.
func (s *Store) fenced(ctx context.Context, vg, volume string) (bool, error) {
	dev, err := s.LVM.DevicePath(ctx, vg, volume)
	if err != nil {
		return false, err
	}
	f, err := os.Open(dev)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET)
	return ro != 0, err
}

// device is a volume's block device, by path and number.
func (s *Store) device(ctx context.Context, vg, volume string) (string, uint64, error) {
	dev, err := s.LVM.DevicePath(ctx, vg, volume)
	if err != nil {
		return "", 0, err
	}
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return "", 0, err
	}
	return dev, st.Rdev, nil
}

// remount sets or clears read-only on the filesystem of device rdev,
// through each of its mounts: the flag is the superblock's, so all of
// them, in every mount namespace, follow.
func remount(rdev uint64, flags uintptr) error {
	mounts, err := mountinfo.Read()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if uint32(m.Major) != unix.Major(rdev) || uint32(m.Minor) != unix.Minor(rdev) {
			continue
		}
		if err := unix.Mount("", m.MountPoint, "", unix.MS_REMOUNT|flags, ""); err != nil {
			return fmt.Errorf("remounting %s (read-only: %v): %w", m.MountPoint, flags&unix.MS_RDONLY != 0, err)
		}
		return nil
	}
	return nil
}

// volume is the pair's volume as the API shows it.
func (s *Store) volume(ctx context.Context, vg, name string) (wire.Volume, error) {
	lv, err := s.thinVolume(ctx, vg, name)
	if err != nil {
		return wire.Volume{}, err
	}
	return wire.Volume{Name: lv.Name, SizeBytes: int64(lv.Size)}, nil
}

func run(ctx context.Context, name string, args ...string) error {
	_, err := command.Exec{}.Run(ctx, name, args...)
	return err
}
