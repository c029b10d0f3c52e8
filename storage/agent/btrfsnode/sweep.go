package btrfsnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/nfs"
)

// quarantineDir holds what a sweep or a create found without a record,
// under {base}/.quarantine/{time}/{tenant}/..., for an admin to inspect
// and delete. Nothing under the base is deleted without a record saying
// it was the store's.
const quarantineDir = ".quarantine"

// Sweep moves aside what a crash left between a subvolume and its
// metadata: a directory with no metadata.json is a volume or snapshot
// that was never finished, or whose deletion was, and nobody can see it.
// Only the configured tenants' directories are looked at, and only
// entries whose names the store could have made; anything else under the
// base (dot-directories, a tenant no longer configured) is left alone.
// Exports are synced first, so none holds such a subvolume mounted.
func (s *Store) Sweep(ctx context.Context, tenants []string) error {
	var refused *nfs.RefusedError // an export that cannot be served holds nothing mounted
	if err := s.SyncExports(ctx); err != nil && !errors.As(err, &refused) {
		return err
	}
	present, err := s.Tenants()
	if err != nil {
		return err
	}
	for _, t := range present {
		if !slices.Contains(tenants, t) {
			continue
		}
		if err := s.sweepDir(filepath.Join(s.Base, t), t+"/", "volume"); err != nil {
			return err
		}
		if err := s.sweepDir(filepath.Join(s.Base, t, contract.SnapshotsDir), t+"/"+contract.SnapshotsDir+"/", "snapshot"); err != nil {
			return err
		}
	}
	return nil
}

// sweepDir quarantines every directory in dir that has a name the store
// could have given it and no record.
func (s *Store) sweepDir(dir, lockPrefix, kind string) error {
	names, err := listDirs(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if contract.CheckName(kind, n) != nil {
			continue
		}
		if err := s.sweepOne(filepath.Join(dir, n), lockPrefix+n); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) sweepOne(dir, key string) error {
	defer s.locks.lock(key)()
	st, err := os.Stat(filepath.Join(dir, metadataFile))
	if err == nil && st.Size() > 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return s.quarantine(dir) // no record, or one a crash left empty (recordNew)
}

// quarantine moves dir, which has no record, out of the layout into the
// quarantine directory, keeping its path under the base; a subvolume
// moves with it. It is reported through Notice.
func (s *Store) quarantine(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	rel, err := filepath.Rel(s.Base, dir)
	if err != nil {
		return err
	}
	to := filepath.Join(s.Base, quarantineDir, time.Now().UTC().Format("20060102T150405.000000000"), rel)
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	if err := os.Rename(dir, to); err != nil {
		return fmt.Errorf("moving %s, which has no %s, to quarantine: %w", dir, metadataFile, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir), filepath.Dir(to)); err != nil {
		return err
	}
	if s.Notice != nil {
		s.Notice("Quarantined", fmt.Sprintf("%s had no %s (a crashed create or delete); moved to %s: inspect it and delete it by hand", dir, metadataFile, to))
	}
	return nil
}
