// Package memstore is a node backend held in memory: volumes as byte
// slices and their replication pairs, keeping the storage contract
// (storage/agent/contract) as the btrfs and LVM backends keep it. The
// contract suite runs against it as against them (contracttest), so the
// failover and replication state machines can be tested in seconds,
// without root, against agents that behave as real ones do.
package memstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// MaxStream bounds what one Receive reads, as the real backends bound a
// stream by the volume's size.
const MaxStream = 64 << 20

// Store is one node's backend: tenant/volume → its bytes, and the pairs.
type Store struct {
	mu      sync.Mutex
	volumes map[string][]byte
	pairs   map[string]*pair
}

type pair struct {
	tenant, name, volume, tokenHash string
	// held are the complete replicas, oldest first.
	held     []replica
	latestAt *time.Time
	fenced   bool
}

type replica struct {
	seq  uint64
	data []byte
}

// New is an empty store.
func New() *Store { return &Store{volumes: map[string][]byte{}, pairs: map[string]*pair{}} }

func key(tenant, name string) string { return tenant + "/" + name }

// Write writes data at the volume's start, making the volume if there is
// none, as the app on it does; a fenced volume refuses it.
func (s *Store) Write(tenant, volume string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pairs {
		if p.tenant == tenant && p.volume == volume && p.fenced {
			return fmt.Errorf("volume %s/%s is fenced: read-only", tenant, volume)
		}
	}
	s.volumes[key(tenant, volume)] = bytes.Clone(data)
	return nil
}

// Read is the volume's bytes.
func (s *Store) Read(tenant, volume string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.volumes[key(tenant, volume)]
	if !ok {
		return nil, contract.Errorf(contract.NotFound, "volume %s not found", volume)
	}
	return bytes.Clone(data), nil
}

func (s *Store) pair(tenant, name string) (*pair, error) {
	if err := contract.CheckName("pair", name); err != nil {
		return nil, err
	}
	p, ok := s.pairs[key(tenant, name)]
	if !ok {
		return nil, contract.Errorf(contract.NotFound, "pair %s not found", name)
	}
	return p, nil
}

func (p *pair) wire() wire.Pair {
	w := wire.Pair{Name: p.name, Tenant: p.tenant, Volume: p.volume, Replicas: []uint64{}, LatestAt: p.latestAt, Fenced: p.fenced}
	for _, r := range p.held {
		w.Replicas = append(w.Replicas, r.seq)
		w.Latest = r.seq
	}
	return w
}

func (p *pair) seqs() []uint64 {
	var out []uint64
	for _, r := range p.held {
		out = append(out, r.seq)
	}
	return out
}

// SetPair implements contract.Pairs.
func (s *Store) SetPair(_ context.Context, tenant, name string, req wire.PairRequest) (wire.Pair, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := contract.CheckName("pair", name); err != nil {
		return wire.Pair{}, err
	}
	if len(req.Token) < replicas.MinTokenLength {
		return wire.Pair{}, contract.Invalidf("pair %s: the token is shorter than %d characters", name, replicas.MinTokenLength)
	}
	if _, ok := s.volumes[key(tenant, req.Volume)]; !ok {
		return wire.Pair{}, contract.Errorf(contract.NotFound, "pair %s: volume %s not found", name, req.Volume)
	}
	p, ok := s.pairs[key(tenant, name)]
	switch {
	case ok && p.volume != req.Volume:
		return wire.Pair{}, contract.Errorf(contract.Conflict, "pair %s exists, of volume %s", name, p.volume)
	case !ok:
		p = &pair{tenant: tenant, name: name, volume: req.Volume}
		s.pairs[key(tenant, name)] = p
	}
	p.tokenHash = replicas.TokenHash(req.Token)
	return p.wire(), nil
}

// GetPair implements contract.Pairs.
func (s *Store) GetPair(_ context.Context, tenant, name string) (wire.Pair, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil {
		return wire.Pair{}, err
	}
	return p.wire(), nil
}

// AuthorizePair implements contract.Pairs.
func (s *Store) AuthorizePair(tenant, name, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil || !replicas.TokenMatches(p.tokenHash, token) {
		return contract.Errorf(contract.Forbidden, "not the token of pair %s", name)
	}
	return nil
}

// SnapshotForSend implements contract.Pairs: the replica is the volume's
// bytes now, whole; replicas the peer never got go.
func (s *Store) SnapshotForSend(_ context.Context, tenant, name string, peerHolds []uint64) (replicas.Outgoing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil {
		return replicas.Outgoing{}, err
	}
	seq, parent, stale := replicas.Next(p.seqs(), peerHolds)
	p.held = slices.DeleteFunc(p.held, func(r replica) bool { return slices.Contains(stale, r.seq) })
	data := bytes.Clone(s.volumes[key(tenant, p.volume)])
	p.held = append(p.held, replica{seq: seq, data: data})
	return replicas.Outgoing{Seq: seq, Parent: parent, MadeAt: time.Now().UTC(),
		Stream: func(_ context.Context, w io.Writer) error { return writeStream(w, data) }}, nil
}

// Sent implements contract.Pairs: the side keeps the newest replica both
// hold, and none older.
func (s *Store) Sent(_ context.Context, tenant, name string, seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil {
		return err
	}
	p.held = slices.DeleteFunc(p.held, func(r replica) bool { return r.seq < seq })
	return nil
}

// Receive implements contract.Pairs: nothing of a stream that did not
// arrive whole becomes a replica.
func (s *Store) Receive(_ context.Context, tenant, name string, seq, parent uint64, madeAt time.Time, r io.Reader, whole func() error) (wire.Pair, error) {
	data, err := readStream(r)
	if err == nil {
		err = whole()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, perr := s.pair(tenant, name)
	switch {
	case perr != nil:
		return wire.Pair{}, perr
	case !replicas.Follows(p.seqs(), seq, parent):
		return wire.Pair{}, contract.Errorf(contract.Conflict, "replica %d of pair %s builds on %d, which this side does not hold (it holds %v)", seq, name, parent, p.seqs())
	case err != nil:
		return wire.Pair{}, fmt.Errorf("replica %d of pair %s did not arrive whole: %w", seq, name, err)
	}
	p.held = slices.DeleteFunc(p.held, func(r replica) bool { return r.seq < parent })
	p.held = append(p.held, replica{seq: seq, data: data})
	sort.Slice(p.held, func(i, j int) bool { return p.held[i].seq < p.held[j].seq })
	at := madeAt.UTC()
	p.latestAt = &at
	return p.wire(), nil
}

// A stream is the replica's length, 8 bytes big-endian, then its bytes:
// as a btrfs send stream or a block delta does, it says itself whether
// it arrived whole.
func writeStream(w io.Writer, data []byte) error {
	if err := binary.Write(w, binary.BigEndian, uint64(len(data))); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

func readStream(r io.Reader) ([]byte, error) {
	var n uint64
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, fmt.Errorf("the stream's header: %w", err)
	}
	if n > MaxStream {
		return nil, contract.Invalidf("a replica of %d bytes is over the bound of %d", n, MaxStream)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("the stream ends before its %d bytes: %w", n, err)
	}
	return data, nil
}

// Promote implements contract.Pairs: the volume becomes the newest
// replica, in one step; again, it is the same.
func (s *Store) Promote(_ context.Context, tenant, name string) (wire.Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil {
		return wire.Volume{}, err
	}
	if len(p.held) == 0 {
		return wire.Volume{}, contract.Errorf(contract.NotFound, "pair %s holds no replica to promote", name)
	}
	s.volumes[key(tenant, p.volume)] = bytes.Clone(p.held[len(p.held)-1].data)
	return s.volume(tenant, p.volume), nil
}

func (s *Store) volume(tenant, name string) wire.Volume {
	return wire.Volume{Name: name, SizeBytes: int64(len(s.volumes[key(tenant, name)]))}
}

// FencePair implements contract.Pairs.
func (s *Store) FencePair(_ context.Context, tenant, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil {
		return "", err
	}
	p.fenced = true
	return p.volume, nil
}

// FencePairs implements contract.Fencer.
func (s *Store) FencePairs(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fenced []string
	for _, p := range s.pairs {
		p.fenced = true
		fenced = append(fenced, key(p.tenant, p.volume))
	}
	sort.Strings(fenced)
	return fenced, nil
}

// UnfencePair implements contract.Pairs.
func (s *Store) UnfencePair(_ context.Context, tenant, name string) (wire.Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pair(tenant, name)
	if err != nil {
		return wire.Volume{}, err
	}
	p.fenced = false
	return s.volume(tenant, p.volume), nil
}

var _ contract.Pairs = (*Store)(nil)
