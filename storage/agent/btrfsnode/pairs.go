package btrfsnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/btrfs"
)

// A pair's replicas live under {base}/{tenant}/.pairs/{pair}/:
//
//	metadata.json    the pair's record: its volume and token hash
//	{seq}/data       a complete replica, read-only, with replica.json
//	{seq}.new/       a snapshot being taken on the sending side
//	{seq}.part/      a stream being received
//
// A replica becomes {seq} only by a rename once it is whole, so a sync
// cut off at any point leaves the newest complete replica as it was;
// what a crash leaves in .new and .part is removed by the next sync or
// sweep. These are the store's own copies under a pair record, never a
// user's data, so unlike a volume without a record they are deleted,
// not quarantined.
const (
	pairsDir    = ".pairs"
	replicaFile = "replica.json"
	newSuffix   = ".new"
	partSuffix  = ".part"
)

// pairRecord is what a pair's metadata.json holds.
type pairRecord struct {
	Name        string `json:"name"`
	Volume      string `json:"volume"`
	TokenSHA256 string `json:"tokenSHA256"`
}

// replicaRecord is what a replica's replica.json holds.
type replicaRecord struct {
	Parent uint64    `json:"parent,omitempty"`
	MadeAt time.Time `json:"madeAt"`
}

// Pair is this side of a replication pair; see wire.Pair.
type Pair = wire.Pair

func (s *Store) pairDir(tenant, name string) string {
	return filepath.Join(s.Base, tenant, pairsDir, name)
}

func (s *Store) pairLock(tenant, name string) func() {
	return s.locks.lock(tenant + "/" + pairsDir + "/" + name)
}

// SetPair makes or changes this side of a pair: the volume it replicates
// and the token its peer authenticates with.
func (s *Store) SetPair(_ context.Context, tenant, name string, req wire.PairRequest) (p Pair, err error) {
	if err := contract.CheckName("pair", name); err != nil {
		return Pair{}, err
	}
	if len(req.Token) < replicas.MinTokenLength {
		return Pair{}, contract.Invalidf("pair %s: the token is %d characters; give at least %d random ones", name, len(req.Token), replicas.MinTokenLength)
	}
	if _, err := s.Get(tenant, req.Volume); err != nil {
		return Pair{}, err
	}
	// One pair per volume: each pair keeps a copy of its volume, so the
	// pairs, and what they receive, grow only with the volumes the
	// tenant's quota bounds. The tenant's pairs lock makes the check and
	// the record one step.
	defer s.locks.lock(tenant + "/" + pairsDir)()
	if other, err := s.pairOfVolume(tenant, req.Volume); err != nil {
		return Pair{}, err
	} else if other != "" && other != name {
		return Pair{}, contract.Errorf(contract.Conflict, "pair %s: volume %s is replicated by pair %s already; a volume has one pair: delete that pair, or name it", name, req.Volume, other)
	}
	defer s.pairLock(tenant, name)()
	defer s.commitDurably(&err)
	dir := s.pairDir(tenant, name)
	var have pairRecord
	err = readMetadata(dir, "pair "+name, &have)
	switch {
	case err == nil && have.Volume != req.Volume:
		return Pair{}, contract.Errorf(contract.Conflict, "pair %s exists, of volume %s", name, have.Volume)
	case err != nil && contract.KindOf(err) != contract.NotFound:
		return Pair{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Pair{}, err
	}
	rec := pairRecord{Name: name, Volume: req.Volume, TokenSHA256: replicas.TokenHash(req.Token)}
	write := recordNew
	if err == nil {
		write = writeMetadata // a record already on disk is never left empty by a crash
	}
	if err := write(dir, rec); err != nil {
		return Pair{}, err
	}
	return s.pairState(tenant, rec)
}

// pairOfVolume is the tenant's pair of volume, or "".
func (s *Store) pairOfVolume(tenant, volume string) (string, error) {
	names, err := listDirs(filepath.Join(s.Base, tenant, pairsDir))
	if err != nil {
		return "", err
	}
	for _, n := range names {
		rec, err := s.pairRecord(tenant, n)
		if contract.KindOf(err) == contract.NotFound || contract.KindOf(err) == contract.Invalid {
			continue // a pair being made, or a leftover the sweep handles
		}
		if err != nil {
			return "", err
		}
		if rec.Volume == volume {
			return n, nil
		}
	}
	return "", nil
}

// GetPair returns this side of a pair with its newest replica.
func (s *Store) GetPair(_ context.Context, tenant, name string) (Pair, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return Pair{}, err
	}
	return s.pairState(tenant, rec)
}

func (s *Store) pairRecord(tenant, name string) (pairRecord, error) {
	if err := contract.CheckName("tenant", tenant); err != nil {
		return pairRecord{}, err
	}
	if err := contract.CheckName("pair", name); err != nil {
		return pairRecord{}, err
	}
	var rec pairRecord
	err := readMetadata(s.pairDir(tenant, name), "pair "+name, &rec)
	return rec, err
}

// AuthorizePair checks the token a peer sent for the pair.
func (s *Store) AuthorizePair(tenant, name, token string) error {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return err
	}
	if !replicas.TokenMatches(rec.TokenSHA256, token) {
		return contract.Errorf(contract.Forbidden, "pair %s: the token is not this pair's", name)
	}
	return nil
}

func (s *Store) pairState(tenant string, rec pairRecord) (Pair, error) {
	seqs, err := s.replicas(tenant, rec.Name)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{Name: rec.Name, Volume: rec.Volume, Replicas: seqs}
	if p.Fenced, err = s.FS.ReadOnly(context.Background(), filepath.Join(s.volumeDir(tenant, rec.Volume), dataDir)); err != nil {
		return Pair{}, err
	}
	if len(seqs) == 0 {
		return p, nil
	}
	p.Latest = seqs[len(seqs)-1]
	r, err := s.replicaRecord(tenant, rec.Name, p.Latest)
	if err != nil {
		return Pair{}, err
	}
	p.LatestAt = &r.MadeAt
	return p, nil
}

// replicas lists the complete replicas of a pair, oldest first.
func (s *Store) replicas(tenant, name string) ([]uint64, error) {
	names, err := listDirs(s.pairDir(tenant, name))
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, n := range names {
		if seq, err := strconv.ParseUint(n, 10, 64); err == nil {
			seqs = append(seqs, seq)
		}
	}
	return seqs, nil
}

func (s *Store) replicaDir(tenant, name string, seq uint64) string {
	return filepath.Join(s.pairDir(tenant, name), strconv.FormatUint(seq, 10))
}

func (s *Store) replicaRecord(tenant, name string, seq uint64) (replicaRecord, error) {
	var r replicaRecord
	data, err := os.ReadFile(filepath.Join(s.replicaDir(tenant, name, seq), replicaFile))
	if err != nil {
		return r, fmt.Errorf("pair %s, replica %d: %w", name, seq, err)
	}
	return r, json.Unmarshal(data, &r)
}

// Outgoing is a replica made on the sending side, to be streamed to the
// peer.
type Outgoing = replicas.Outgoing

// SnapshotForSend takes the next replica of the pair's volume, given
// the replicas the peer holds. The newest replica both sides hold
// becomes the parent, so only what changed since it is sent; with none
// in common the whole volume is. Replicas of this side the peer never
// got are removed first: no stream can build on them.
func (s *Store) SnapshotForSend(ctx context.Context, tenant, name string, peerHolds []uint64) (Outgoing, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return Outgoing{}, err
	}
	defer s.locks.lock(tenant + "/" + rec.Volume)()
	defer s.pairLock(tenant, name)()
	v, err := s.get(tenant, rec.Volume)
	if err != nil {
		return Outgoing{}, err
	}
	if err := s.clearIncomplete(ctx, tenant, name); err != nil {
		return Outgoing{}, err
	}
	seqs, err := s.replicas(tenant, name)
	if err != nil {
		return Outgoing{}, err
	}
	out := Outgoing{MadeAt: time.Now().UTC()}
	var stale []uint64
	out.Seq, out.Parent, stale = replicas.Next(seqs, peerHolds)
	for _, seq := range stale {
		if err := s.removeReplica(ctx, s.replicaDir(tenant, name, seq)); err != nil {
			return Outgoing{}, err
		}
	}
	parentPath := ""
	if out.Parent != 0 {
		parentPath = filepath.Join(s.replicaDir(tenant, name, out.Parent), dataDir)
	}
	dir := s.replicaDir(tenant, name, out.Seq)
	if err := os.MkdirAll(dir+newSuffix, 0o700); err != nil {
		return Outgoing{}, err
	}
	if err := s.FS.Snapshot(ctx, v.Path, filepath.Join(dir+newSuffix, dataDir), true); err != nil {
		return Outgoing{}, err
	}
	if err := finishReplica(dir+newSuffix, dir, replicaRecord{Parent: out.Parent, MadeAt: out.MadeAt}); err != nil {
		return Outgoing{}, err
	}
	path := filepath.Join(dir, dataDir)
	out.Stream = func(ctx context.Context, w io.Writer) error { return btrfs.Send(ctx, w, path, parentPath) }
	return out, nil
}

// Sent records that the peer holds replica seq: older ones are no
// longer anyone's parent.
func (s *Store) Sent(ctx context.Context, tenant, name string, seq uint64) error {
	defer s.pairLock(tenant, name)()
	return s.pruneBefore(ctx, tenant, name, seq)
}

// pruneBefore removes the replicas older than seq.
func (s *Store) pruneBefore(ctx context.Context, tenant, name string, seq uint64) error {
	seqs, err := s.replicas(tenant, name)
	if err != nil {
		return err
	}
	for _, old := range seqs {
		if old < seq {
			if err := s.removeReplica(ctx, s.replicaDir(tenant, name, old)); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearIncomplete removes the .new and .part directories a cut-off
// sync or a crash left in the pair.
func (s *Store) clearIncomplete(ctx context.Context, tenant, name string) error {
	dir := s.pairDir(tenant, name)
	names, err := listDirs(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, newSuffix) || strings.HasSuffix(n, partSuffix) {
			if err := s.removeReplica(ctx, filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeReplica deletes a replica directory and every subvolume in it: a
// received one is named as the sender's was.
func (s *Store) removeReplica(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := s.deleteIfSubvolume(ctx, filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(dir))
}

// promoteSuffix names the copy a promotion swaps in; after the swap it
// holds the volume's old data until that is deleted.
const promoteSuffix = ".promote"

// Promote replaces the data of the pair's volume with a writable copy of
// the newest replica, so that the volume serves what the peer last sent
// and nothing this side wrote since. The two are swapped in one atomic
// rename: after a crash the volume holds either the old data or the
// replica, and the leftover is deleted by the next promotion or sweep.
// A volume with NFS clients is refused: they would keep the old data.
func (s *Store) Promote(ctx context.Context, tenant, name string) (Volume, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return Volume{}, err
	}
	defer s.locks.lock(tenant + "/" + rec.Volume)()
	defer s.pairLock(tenant, name)()
	v, err := s.get(tenant, rec.Volume)
	if err != nil {
		return Volume{}, err
	}
	if len(v.Clients) > 0 {
		return Volume{}, contract.Errorf(contract.InUse, "volume %s of pair %s is exported to %s; remove the exports before promoting", v.Name, name, strings.Join(v.Clients, ", "))
	}
	state, err := s.pairState(tenant, rec)
	if err != nil {
		return Volume{}, err
	}
	if state.Latest == 0 {
		return Volume{}, contract.Errorf(contract.NotFound, "pair %s holds no complete replica to promote", name)
	}
	dir := s.volumeDir(tenant, v.Name)
	swap := filepath.Join(dir, dataDir+promoteSuffix)
	if err := s.deleteIfSubvolume(ctx, swap); err != nil {
		return Volume{}, err
	}
	groups, err := s.tenantGroups(ctx, tenant)
	if err != nil {
		return Volume{}, err
	}
	if err := s.FS.Snapshot(ctx, filepath.Join(s.replicaDir(tenant, name, state.Latest), dataDir), swap, false, groups...); err != nil {
		return Volume{}, err
	}
	if err := unix.Renameat2(unix.AT_FDCWD, swap, unix.AT_FDCWD, filepath.Join(dir, dataDir), unix.RENAME_EXCHANGE); err != nil {
		return Volume{}, fmt.Errorf("volume %s: swapping in replica %d of pair %s: %w", v.Name, state.Latest, name, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return Volume{}, err
	}
	if err := s.apply(ctx, dir, &v, Tuning{Compression: v.Compression, CompressionLevel: v.CompressionLevel}, false); err != nil {
		return Volume{}, err
	}
	if err := s.deleteIfSubvolume(ctx, swap); err != nil {
		return Volume{}, err
	}
	return s.fill(tenant, v), nil
}

// deleteIfSubvolume deletes the subvolume at path, if there is one.
func (s *Store) deleteIfSubvolume(ctx context.Context, path string) error {
	ok, err := btrfs.IsSubvolume(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !ok) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.FS.DeleteSubvolume(ctx, path)
}
