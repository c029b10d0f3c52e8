// Package lvmnode is the LVM backend on a node: the LogicalVolumes bound
// to the node made real (LogicalVolumeReconciler; the volume groups they
// live in are volumegroups'), and the LVM mover's store of replication
// pairs of thin logical volumes, with numbered replicas kept as thin snapshots
// (docs/failover.md). A pair lives in a volume group (the device class),
// which stands where the btrfs store has a tenant.
//
// A replica is the logical volume <volume>.r<seq> beside the pair's
// volume, and counts only once its record <Dir>/<tenant>/<pair>/<seq>.json is
// on disk: the sender writes the record after the snapshot, the receiver
// after every byte of the stream is written, flushed and vouched for by
// its trailer. A replica volume without a record is what a crash or a cut
// stream left, and the next sync removes it; the newest complete replica
// is never touched by a sync that fails.
package lvmnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Store keeps the pairs of one node's volume groups.
type Store struct {
	LVM lvm.Manager
	// Dir holds the pairs' records.
	Dir string

	locks sync.Map // "vg/pair" → *sync.Mutex
}

const (
	pairFile = "pair.json"
	// replicaInfix joins a volume's name and a replica's number.
	replicaInfix = ".r"
	// replicaTag marks a replica volume with its pair.
	replicaTag = "strata.dev/replica-of="
)

// pairRecord is what a pair's pair.json holds.
type pairRecord struct {
	Name string `json:"name"`
	// Group and Volume are the pair's volume.
	Group       string `json:"group"`
	Volume      string `json:"volume"`
	TokenSHA256 string `json:"tokenSHA256"`
}

// replicaRecord is what a replica's <seq>.json holds.
type replicaRecord struct {
	Parent uint64    `json:"parent,omitempty"`
	MadeAt time.Time `json:"madeAt"`
}

func (s *Store) lock(tenant, pair string) func() {
	m, _ := s.locks.LoadOrStore(tenant+"/"+pair, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

func (s *Store) pairDir(tenant, pair string) string { return filepath.Join(s.Dir, tenant, pair) }

func replicaName(volume string, seq uint64) string {
	return volume + replicaInfix + strconv.FormatUint(seq, 10)
}

func (s *Store) replicaRecordPath(tenant, pair string, seq uint64) string {
	return filepath.Join(s.pairDir(tenant, pair), strconv.FormatUint(seq, 10)+".json")
}

// SetPair makes or changes this side of a pair: the thin volume it
// replicates, named <group>/<volume>, and the token its peer
// authenticates with.
func (s *Store) SetPair(ctx context.Context, tenant, name string, req wire.PairRequest) (wire.Pair, error) {
	if err := checkNames(tenant, name); err != nil {
		return wire.Pair{}, err
	}
	if len(req.Token) < replicas.MinTokenLength {
		return wire.Pair{}, invalid("pair %s: the token is %d characters; give at least %d random ones", name, len(req.Token), replicas.MinTokenLength)
	}
	vg, volume, ok := strings.Cut(req.Volume, "/")
	if !ok || vg == "" || volume == "" {
		return wire.Pair{}, invalid("pair %s: volume %q: name an LVM volume as <volume group>/<volume>", name, req.Volume)
	}
	if _, err := s.thinVolume(ctx, vg, volume); err != nil {
		return wire.Pair{}, err
	}
	defer s.lock(tenant, name)()
	have, err := s.pairRecord(tenant, name)
	switch {
	case err == nil && (have.Group != vg || have.Volume != volume):
		return wire.Pair{}, &contract.Error{Kind: contract.Conflict, Message: fmt.Sprintf("pair %s exists, of volume %s/%s", name, have.Group, have.Volume)}
	case err != nil && contract.KindOf(err) != contract.NotFound:
		return wire.Pair{}, err
	}
	dir := s.pairDir(tenant, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return wire.Pair{}, err
	}
	rec := pairRecord{Name: name, Group: vg, Volume: volume, TokenSHA256: replicas.TokenHash(req.Token)}
	data, err := json.Marshal(rec)
	if err != nil {
		return wire.Pair{}, err
	}
	if err := atomicfile.Write(filepath.Join(dir, pairFile), data); err != nil {
		return wire.Pair{}, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))); err != nil {
		return wire.Pair{}, err
	}
	return s.pairState(ctx, tenant, rec)
}

// GetPair returns this side of a pair with its complete replicas.
func (s *Store) GetPair(ctx context.Context, tenant, name string) (wire.Pair, error) {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return wire.Pair{}, err
	}
	return s.pairState(ctx, tenant, rec)
}

// AuthorizePair checks the token a peer sent for the pair.
func (s *Store) AuthorizePair(tenant, name, token string) error {
	rec, err := s.pairRecord(tenant, name)
	if err != nil {
		return err
	}
	if !replicas.TokenMatches(rec.TokenSHA256, token) {
		return &contract.Error{Kind: contract.Forbidden, Message: fmt.Sprintf("pair %s: the token is not this pair's", name)}
	}
	return nil
}

func (s *Store) pairRecord(tenant, name string) (pairRecord, error) {
	if err := checkNames(tenant, name); err != nil {
		return pairRecord{}, err
	}
	var rec pairRecord
	data, err := os.ReadFile(filepath.Join(s.pairDir(tenant, name), pairFile))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, &contract.Error{Kind: contract.NotFound, Message: fmt.Sprintf("pair %s not found", name)}
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("pair %s: %s is damaged: %w", name, filepath.Join(s.pairDir(tenant, name), pairFile), err)
	}
	return rec, nil
}

// pairState is this side as the API shows it.
func (s *Store) pairState(ctx context.Context, tenant string, rec pairRecord) (wire.Pair, error) {
	seqs, err := s.complete(ctx, tenant, rec)
	if err != nil {
		return wire.Pair{}, err
	}
	p := wire.Pair{Name: rec.Name, Tenant: tenant, Volume: rec.Group + "/" + rec.Volume, Replicas: seqs}
	if p.Fenced, err = s.fenced(ctx, rec.Group, rec.Volume); err != nil {
		return wire.Pair{}, err
	}
	if len(seqs) > 0 {
		p.Latest = seqs[len(seqs)-1]
		r, err := s.replicaRecord(tenant, rec.Name, p.Latest)
		if err != nil {
			return wire.Pair{}, err
		}
		p.LatestAt = &r.MadeAt
	}
	return p, nil
}

// complete lists the pair's complete replicas, oldest first: those with
// both a volume and a record.
func (s *Store) complete(ctx context.Context, tenant string, rec pairRecord) ([]uint64, error) {
	recorded, present, err := s.scan(ctx, tenant, rec)
	return intersect(recorded, present), err
}

// scan reads the replica numbers the pair has records of and those it
// has volumes of, each sorted.
func (s *Store) scan(ctx context.Context, tenant string, rec pairRecord) (recorded, present []uint64, err error) {
	if recorded, err = s.recorded(tenant, rec.Name); err != nil {
		return nil, nil, err
	}
	present, err = s.replicaVolumes(ctx, rec)
	return recorded, present, err
}

// intersect is what both sorted lists hold, in order.
func intersect(a, b []uint64) []uint64 {
	var both []uint64
	for _, x := range a {
		if slices.Contains(b, x) {
			both = append(both, x)
		}
	}
	return both
}

// recorded lists the replica numbers with a record, sorted.
func (s *Store) recorded(tenant, pair string) ([]uint64, error) {
	entries, err := os.ReadDir(s.pairDir(tenant, pair))
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if seq, err := strconv.ParseUint(base, 10, 64); ok && err == nil && seq > 0 {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// replicaVolumes lists the numbers of the pair's replica volumes in the
// group, complete or not.
func (s *Store) replicaVolumes(ctx context.Context, rec pairRecord) ([]uint64, error) {
	lvs, err := s.LVM.LogicalVolumes(ctx, rec.Group)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, lv := range lvs {
		num, ok := strings.CutPrefix(lv.Name, rec.Volume+replicaInfix)
		if !ok || !slices.Contains(lv.Tags, replicaTag+rec.Name) {
			continue
		}
		if seq, err := strconv.ParseUint(num, 10, 64); err == nil && seq > 0 {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

func (s *Store) replicaRecord(tenant, pair string, seq uint64) (replicaRecord, error) {
	var r replicaRecord
	data, err := os.ReadFile(s.replicaRecordPath(tenant, pair, seq))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("pair %s, replica %d: its record is damaged: %w", pair, seq, err)
	}
	return r, nil
}

// recordReplica marks a replica complete, durably.
func (s *Store) recordReplica(tenant, pair string, seq uint64, r replicaRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.replicaRecordPath(tenant, pair, seq), data); err != nil {
		return err
	}
	return atomicfile.SyncDir(s.pairDir(tenant, pair))
}

// thinVolume reads a volume a pair may replicate: a thin one, since the
// mover's replicas are thin snapshots.
func (s *Store) thinVolume(ctx context.Context, vg, name string) (lvm.LogicalVolume, error) {
	lv, err := lvm.FindVolume(ctx, s.LVM, vg, name)
	if errors.Is(err, lvm.ErrNotFound) {
		return lv, &contract.Error{Kind: contract.NotFound, Message: fmt.Sprintf("volume %s/%s not found", vg, name)}
	}
	if err != nil {
		return lv, err
	}
	if lv.Kind != lvm.Thin {
		return lv, invalid("volume %s/%s is %s: the LVM mover replicates thin volumes (a device class with a thin pool), whose snapshots cost nothing", vg, name, lv.Kind)
	}
	// The caller names any volume of the node: only a claim's volume,
	// which a LogicalVolume made and tagged, may be synced away,
	// promoted over or fenced, never one strata does not manage.
	if !slices.ContainsFunc(lv.Tags, func(t string) bool { return strings.HasPrefix(t, storagev1alpha1.LogicalVolumeTagPrefix) }) {
		return lv, &contract.Error{Kind: contract.Forbidden, Message: fmt.Sprintf("volume %s/%s is not a claim's volume (it lacks a %s tag): the LVM mover replicates only volumes strata made", vg, name, storagev1alpha1.LogicalVolumeTagPrefix)}
	}
	return lv, nil
}

func checkNames(tenant, pair string) error {
	if err := contract.CheckName("tenant", tenant); err != nil {
		return err
	}
	return contract.CheckName("pair", pair)
}

func invalid(format string, args ...any) error {
	return &contract.Error{Kind: contract.Invalid, Message: fmt.Sprintf(format, args...)}
}

var _ contract.Pairs = (*Store)(nil)
