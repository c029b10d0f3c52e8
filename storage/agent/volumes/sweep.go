package volumes

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Sweep removes what a crash left between a subvolume and its metadata:
// a directory with no metadata.json is a volume or snapshot that was
// never finished, or whose deletion was, and nobody can see it. Exports
// are synced first, so none holds such a subvolume mounted.
func (s *Store) Sweep(ctx context.Context) error {
	if err := s.SyncExports(ctx); err != nil {
		return err
	}
	tenants, err := s.Tenants()
	if err != nil {
		return err
	}
	for _, t := range tenants {
		if err := s.sweepDir(ctx, filepath.Join(s.Base, t), t+"/", snapshotsDir); err != nil {
			return err
		}
		if err := s.sweepDir(ctx, filepath.Join(s.Base, t, snapshotsDir), t+"/"+snapshotsDir+"/", ""); err != nil {
			return err
		}
	}
	return nil
}

// sweepDir sweeps every directory in dir but skip.
func (s *Store) sweepDir(ctx context.Context, dir, lockPrefix, skip string) error {
	names, err := listDirs(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == skip {
			continue
		}
		if err := s.sweepOne(ctx, filepath.Join(dir, n), lockPrefix+n); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) sweepOne(ctx context.Context, dir, key string) error {
	defer s.locks.lock(key)()
	_, err := os.Stat(filepath.Join(dir, metadataFile))
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return s.removeDir(ctx, dir)
}
