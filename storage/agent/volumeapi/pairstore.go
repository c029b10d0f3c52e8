package volumeapi

import (
	"context"
	"io"
	"time"

	"github.com/strata-gitops/strata/storage/agent/lvmpairs"
	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/agent/volumes"
)

// Pairs is a store of replication pairs behind the pair and replica
// routes: the btrfs store, whose tenants are the API's, or the LVM
// mover's, whose "tenants" are the node's volume groups. One set of
// routes, one sender and one receiver serve both.
type Pairs interface {
	SetPair(ctx context.Context, tenant, name string, req wire.PairRequest) (wire.Pair, error)
	GetPair(ctx context.Context, tenant, name string) (wire.Pair, error)
	AuthorizePair(tenant, name, token string) error
	SnapshotForSend(ctx context.Context, tenant, name string, peerHolds []uint64) (replicas.Outgoing, error)
	Sent(ctx context.Context, tenant, name string, seq uint64) error
	Receive(ctx context.Context, tenant, name string, seq, parent uint64, madeAt time.Time, r io.Reader, whole func() error) (wire.Pair, error)
	Promote(ctx context.Context, tenant, name string) (wire.Volume, error)
	FencePair(ctx context.Context, tenant, name string) (string, error)
	UnfencePair(ctx context.Context, tenant, name string) (wire.Volume, error)
}

// btrfsPairs is the btrfs store as Pairs: its record reads need no
// context.
type btrfsPairs struct{ *volumes.Store }

func (b btrfsPairs) SetPair(_ context.Context, tenant, name string, req wire.PairRequest) (wire.Pair, error) {
	return b.Store.SetPair(tenant, name, req)
}

func (b btrfsPairs) GetPair(_ context.Context, tenant, name string) (wire.Pair, error) {
	return b.Store.GetPair(tenant, name)
}

var (
	_ Pairs = btrfsPairs{}
	_ Pairs = (*lvmpairs.Store)(nil)
)

// NewPairServer serves only the pair and replica routes, and health and
// metrics, of a store of pairs: the node agent's API for the LVM mover.
func NewPairServer(pairs Pairs, tenants *Tenants) *Server {
	return &Server{Pairs: pairs, Tenants: tenants, metrics: newMetrics(nil), streams: make(streamBudget, MaxStreams)}
}
