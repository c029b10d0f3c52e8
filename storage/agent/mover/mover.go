// Package mover is how replication and failover reach the agent that
// holds one side of a pair, whichever backend holds the volume and
// however the agent is reached. As VolSync's movers are, each of
// strata's is found by the volume it serves: the btrfs mover through the
// volume's StorageClass (storage/csi/btrfsbackend), the LVM mover through
// the volume's node (failover/lvmagents). The state machines of
// failover/replication and failover/controller know only these
// interfaces; volumeapi.Client is the one over the node API, and tests
// run the machines against a fake that keeps the same contract.
package mover

import (
	"context"

	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// Agent is one agent's side of its pairs, as a mover drives it.
type Agent interface {
	// Address is where peers reach the agent; two sides at one address
	// are on one node, and survive no node loss.
	Address() string
	// SetPair makes the pair of a volume, or checks the one there is.
	SetPair(ctx context.Context, name string, req wire.PairRequest) (wire.Pair, error)
	GetPair(ctx context.Context, name string) (wire.Pair, error)
	// Sync sends the pair's next replica to the peer req names. It takes
	// as long as its data: only ctx bounds it.
	Sync(ctx context.Context, name string, req wire.SyncRequest) (wire.Replica, error)
	// Promote makes the pair's newest replica the volume.
	Promote(ctx context.Context, name string) (wire.Volume, error)
	// Fence stops the volume's writers until Unfence.
	Fence(ctx context.Context, name string) (wire.Pair, error)
	Unfence(ctx context.Context, name string) (wire.Volume, error)
}

// Agents finds the agent that holds a volume, by the volume's CSI
// handle, and the volume's name there.
type Agents interface {
	AgentOf(ctx context.Context, volumeHandle string) (Agent, string, error)
}
