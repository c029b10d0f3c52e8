package btrfsnode

import (
	"context"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/btrfs"
)

// FencePairs stops every write to the volume of each pair in the store:
// a node that has lost touch with the cluster stops writing to what it
// replicates before the other side is promoted. It stays so until
// UnfencePair or a promotion,
// never by itself: a node that comes back cannot know whether its backup
// was promoted meanwhile. It returns the volumes it fenced.
func (s *Store) FencePairs(ctx context.Context) ([]string, error) {
	tenants, err := s.Tenants()
	if err != nil {
		return nil, err
	}
	var fenced []string
	var errs []error
	for _, tenant := range tenants {
		names, err := listDirs(filepath.Join(s.Base, tenant, pairsDir))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			volume, err := s.FencePair(ctx, tenant, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fenced = append(fenced, tenant+"/"+volume)
		}
	}
	return fenced, errors.Join(errs...)
}

// FencePair fences the volume of one pair, as FencePairs does, and
// returns its name: the failover controller demotes an old primary this
// way before failback, and quiesces the backup before the final sync.
// It does not take the volume's lock: a lock held by a stuck request
// must not hold the fence up.
func (s *Store) FencePair(ctx context.Context, tenant, name string) (string, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return "", err
	}
	return rec.Volume, fence(ctx, s.FS, filepath.Join(s.volumeDir(tenant, rec.Volume), dataDir))
}

// UnfencePair makes the pair's volume writable again: the failover
// controller calls it when the node came back before its backup was
// promoted.
func (s *Store) UnfencePair(ctx context.Context, tenant, name string) (Volume, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return Volume{}, err
	}
	defer s.locks.lock(tenant + "/" + rec.Volume)()
	v, err := s.get(tenant, rec.Volume)
	if err != nil {
		return Volume{}, err
	}
	if err := s.FS.SetReadOnly(ctx, v.Path, false); err != nil {
		return Volume{}, err
	}
	return s.fill(tenant, v), nil
}

// fence makes the subvolume read-only, which refuses every new write
// through any mount of it (bind mounts into pods, NFS exports), then
// kills the processes that still hold a file of it open for writing:
// btrfs checks the flag when a file is opened, not at each write, so a
// database's open files would go on writing. A subvolume has a device
// number of its own, so its open files are told apart by that, whatever
// mount and mount namespace they were opened through.
func fence(ctx context.Context, fs *btrfs.Filesystem, path string) error {
	if err := fs.SetReadOnly(ctx, path, true); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	return replicas.KillWriters(st.Dev)
}
