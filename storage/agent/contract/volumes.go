package contract

import (
	"context"

	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// Volumes is a backend's tenants' volumes, their snapshots and clones,
// and the NFS clients each is exported to: what the node API's volume
// routes serve. The btrfs backend serves them; the LVM backend's volumes
// are LogicalVolume objects, made real on the node by their reconciler,
// and it serves none of these routes.
type Volumes interface {
	Create(ctx context.Context, tenant string, req wire.CreateRequest) (v wire.Volume, created bool, err error)
	Get(tenant, name string) (wire.Volume, error)
	List(tenant string) ([]wire.Volume, error)
	Update(ctx context.Context, tenant, name string, req wire.UpdateRequest) (wire.Volume, error)
	Delete(ctx context.Context, tenant, name string, cascade bool) error

	CreateSnapshot(ctx context.Context, tenant string, req wire.SnapshotRequest) (snap wire.Snapshot, created bool, err error)
	GetSnapshot(tenant, name string) (wire.Snapshot, error)
	// ListSnapshots lists a tenant's snapshots, of one volume when volume
	// is set.
	ListSnapshots(tenant, volume string) ([]wire.Snapshot, error)
	DeleteSnapshot(ctx context.Context, tenant, name string) error
	Clone(ctx context.Context, tenant string, req wire.CloneRequest) (v wire.Volume, created bool, err error)

	AddExport(ctx context.Context, tenant, name, client string) (wire.Volume, error)
	RemoveExport(ctx context.Context, tenant, name, client string) (wire.Volume, error)

	// Capacity is the size of what the volumes live on and its free
	// space, in bytes; an error says the backend cannot serve.
	Capacity() (size, free int64, err error)
}

// Store is a backend that serves both volumes and their pairs.
type Store interface {
	Volumes
	Pairs
}
