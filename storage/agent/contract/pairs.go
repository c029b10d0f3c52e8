package contract

import (
	"context"
	"io"
	"time"

	"github.com/strata-gitops/strata/storage/agent/replicas"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// Pairs is a backend's replication pairs: one side of each pair, its
// numbered read-only replicas, the sync that sends or receives the next,
// promotion of the newest to the volume, and the fence that stops the
// volume's writers. The node API serves any Pairs on one set of routes;
// a tenant is the API's tenant on btrfs, a volume group on LVM.
//
// What every backend promises (contracttest checks it):
//   - a sync cut at any point leaves the last whole replica the newest,
//     and the next sync goes on from it;
//   - a promotion is atomic, or resumes when asked again after a crash;
//   - a fence stops the volume's writers and holds until unfenced,
//     across a restart of the agent.
type Pairs interface {
	// SetPair makes the pair of a volume, or checks the one there is.
	SetPair(ctx context.Context, tenant, name string, req wire.PairRequest) (wire.Pair, error)
	GetPair(ctx context.Context, tenant, name string) (wire.Pair, error)
	// AuthorizePair says whether token is the pair's own.
	AuthorizePair(tenant, name, token string) error
	// SnapshotForSend takes the next replica to send, against the newest
	// one the peer holds of peerHolds.
	SnapshotForSend(ctx context.Context, tenant, name string, peerHolds []uint64) (replicas.Outgoing, error)
	// Sent records that the peer holds replica seq whole.
	Sent(ctx context.Context, tenant, name string, seq uint64) error
	// Receive takes replica seq, made from parent at madeAt, from r; whole
	// says, once r is read, whether the stream arrived whole. Nothing of
	// a stream that was not becomes a replica.
	Receive(ctx context.Context, tenant, name string, seq, parent uint64, madeAt time.Time, r io.Reader, whole func() error) (wire.Pair, error)
	// Promote makes the newest replica the volume.
	Promote(ctx context.Context, tenant, name string) (wire.Volume, error)
	Fencer
	FencePair(ctx context.Context, tenant, name string) (string, error)
	UnfencePair(ctx context.Context, tenant, name string) (wire.Volume, error)
}

// Fencer fences every replicated volume a backend holds, as the agent's
// self-fence does when the node's Lease goes unrenewed, and names them.
type Fencer interface {
	FencePairs(ctx context.Context) ([]string, error)
}
