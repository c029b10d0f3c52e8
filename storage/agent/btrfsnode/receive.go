package btrfsnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/btrfs"
)

// Receive makes replica seq of the pair from a send stream whose parent
// is replica parent (0 for a whole stream). whole is called once the
// stream has ended and says whether every byte the peer sent arrived;
// only then does the replica count. Older replicas are removed after.
func (s *Store) Receive(ctx context.Context, tenant, name string, seq, parent uint64, madeAt time.Time, r io.Reader, whole func() error) (Pair, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return Pair{}, err
	}
	defer s.pairLock(tenant, name)()
	have, err := s.pairState(tenant, rec)
	if err != nil {
		return Pair{}, err
	}
	if !replicas.Follows(have.Replicas, seq, parent) {
		return Pair{}, contract.Errorf(contract.Conflict, "pair %s holds replicas %v; a stream of replica %d from parent %d does not follow them", name, have.Replicas, seq, parent)
	}
	if err := s.clearIncomplete(ctx, tenant, name); err != nil {
		return Pair{}, err
	}
	confine, err := s.receiveConfinement(tenant, name, rec.Volume, parent)
	if err != nil {
		return Pair{}, err
	}
	started := time.Now().UTC()
	dir := s.replicaDir(tenant, name, seq)
	if err := os.MkdirAll(dir+partSuffix, 0o700); err != nil {
		return Pair{}, err
	}
	err = s.FS.Receive(ctx, r, dir+partSuffix, confine)
	if errors.Is(err, btrfs.ErrStreamRefused) {
		err = contract.Errorf(contract.Invalid, "pair %s, replica %d: %v; nothing of it is kept. strata's own agents never send such a stream: check what sends to this pair, and that its token is not known elsewhere", name, seq, err)
	}
	if err == nil {
		err = whole()
	}
	if err == nil {
		err = finishReplica(dir+partSuffix, dir, replicaRecord{Parent: parent, MadeAt: earliest(madeAt, started)})
	}
	if err != nil {
		return Pair{}, errors.Join(fmt.Errorf("pair %s, replica %d: %w; replica %d is kept", name, seq, err, have.Latest),
			s.removeReplica(ctx, dir+partSuffix))
	}
	if err := s.pruneBefore(ctx, tenant, name, seq); err != nil {
		return Pair{}, err
	}
	return s.pairState(tenant, rec)
}

// receiveConfinement is what a stream of the pair may make: the
// replica's data subvolume, from the local copy of its parent, in no more
// bytes than twice its volume's size and 64 MiB for metadata, and never
// more than the tenant's quota. A sender cannot make a replica larger
// than what it replicates: a received replica is the agent's copy,
// outside the tenant's qgroup, so it is bounded here; with one pair per
// volume, a tenant's replicas are bounded by its volumes, which its quota
// bounds, not by its quota once per pair.
func (s *Store) receiveConfinement(tenant, name, volume string, parent uint64) (btrfs.Confinement, error) {
	v, err := s.Get(tenant, volume)
	if err != nil {
		return btrfs.Confinement{}, err
	}
	c := btrfs.Confinement{Name: dataDir, MaxBytes: 2*v.SizeBytes + 64<<20}
	if q := s.Quotas[tenant].total(); q > 0 {
		c.MaxBytes = min(c.MaxBytes, q)
	}
	if parent != 0 {
		c.Parent = filepath.Join(s.replicaDir(tenant, name, parent), dataDir)
	}
	return c, nil
}

// earliest is the older of two times. A replica's time is what its
// sender says it was made at, but never later than when it began to
// arrive: a sender cannot make old data look newer than its receipt.
func earliest(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}

// finishReplica records a replica in its .new or .part directory, whose
// data is complete, and renames it to its number: from then on it is
// the pair's newest replica, after a crash too.
func finishReplica(from, dir string, r replicaRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(from, replicaFile), data); err != nil {
		return err
	}
	if err := os.Rename(from, dir); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(dir))
}
