package csi

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// backend serves the controller calls for one kind of volume: LVM
// logical volumes on the nodes, or btrfs volumes on a storage host's
// agent. The Controller checks a call's arguments and routes it once, by
// the class parameters or by the class a volume ID names; no call
// branches on the kind of volume after that.
type backend interface {
	CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
	DeleteVolume(ctx context.Context, id VolumeID, req *csi.DeleteVolumeRequest) error
	ControllerExpandVolume(ctx context.Context, id VolumeID, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error)
	ValidateVolumeCapabilities(ctx context.Context, id VolumeID, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error)
	ControllerPublishVolume(ctx context.Context, id VolumeID, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error)
	ControllerUnpublishVolume(ctx context.Context, id VolumeID, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error)
	CreateSnapshot(ctx context.Context, id VolumeID, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error)
	DeleteSnapshot(ctx context.Context, id VolumeID, req *csi.DeleteSnapshotRequest) error
	GetSnapshot(ctx context.Context, id VolumeID, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error)
	GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error)
	listVolumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error)
	listSnapshots(ctx context.Context) ([]*csi.Snapshot, error)
}

var (
	_ backend = (*lvmBackend)(nil)
	_ backend = (*btrfsBackend)(nil)
)

// lvmBackend keeps volumes as LogicalVolume objects that each node's
// agent makes real in its volume groups. Its LogicalVolume service
// (logicalvolumes.go) creates them, waits for their agents, and is woken
// by changes instead of polling.
type lvmBackend struct {
	Client  client.Client
	Cache   client.Reader
	Wait    time.Duration
	changes *notifier
}

// backends are every backend, for the calls that list what all hold.
func (c *Controller) backends() []backend { return []backend{c.lvm, c.btrfs} }

// byParameters is the backend of a class, by its parameters.
func (c *Controller) byParameters(params map[string]string) backend {
	if isBtrfs(params) {
		return c.btrfs
	}
	return c.lvm
}

// byID is the backend of the class a volume or snapshot ID names.
func (c *Controller) byID(ctx context.Context, volumeID string, secrets map[string]string) (backend, VolumeID, error) {
	id, btrfs, err := c.btrfs.route(ctx, volumeID, secrets)
	switch {
	case err != nil:
		return nil, id, err
	case btrfs:
		return c.btrfs, id, nil
	}
	return c.lvm, id, nil
}

// nodeBackend serves the node calls for one kind of volume; the Node
// routes each call once, by the volume context CreateVolume gave it, or,
// for the calls that carry none, by what is mounted at the volume path.
type nodeBackend interface {
	stage(ctx context.Context, req *csi.NodeStageVolumeRequest) error
	publish(ctx context.Context, req *csi.NodePublishVolumeRequest) error
	stats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error)
	expand(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error)
}

// lvmNode and btrfsNode are the node sides of the two backends.
type (
	lvmNode   struct{ n *Node }
	btrfsNode struct{ n *Node }
)

// byContext is the node backend of a volume, by its volume context.
func (n *Node) byContext(volumeContext map[string]string) nodeBackend {
	if volumeContext[BackendContext] == backendBtrfs {
		return btrfsNode{n}
	}
	return lvmNode{n}
}

// byMount is the node backend of the volume mounted at path.
func (n *Node) byMount(volumeID, path string) (nodeBackend, error) {
	btrfs, err := isBtrfsMount(volumeID, path)
	switch {
	case err != nil:
		return nil, err
	case btrfs:
		return btrfsNode{n}, nil
	}
	return lvmNode{n}, nil
}
