// Package backend is the contract between strata's CSI driver and the
// kinds of volume it serves (storage/csi/lvmbackend,
// storage/csi/btrfsbackend): the interfaces each kind implements, the
// volume IDs all share, and the argument checks and mount steps more than
// one kind uses.
package backend

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Controller serves the controller calls for one kind of volume: LVM
// logical volumes on the nodes, or btrfs volumes on a storage host's
// agent. The driver checks a call's arguments and routes it once, by the
// class parameters or by the class a volume ID names; no call branches on
// the kind of volume after that. Volumes and Snapshots list what the
// backend holds, for ListVolumes and ListSnapshots.
type Controller interface {
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
	Volumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error)
	Snapshots(ctx context.Context) ([]*csi.Snapshot, error)
}

// Node serves the node calls for one kind of volume; the driver's Node
// service routes each call once, by the volume context CreateVolume gave it, or,
// for the calls that carry none, by what is mounted at the volume path.
type Node interface {
	Stage(ctx context.Context, req *csi.NodeStageVolumeRequest) error
	Publish(ctx context.Context, req *csi.NodePublishVolumeRequest) error
	Stats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error)
	Expand(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error)
}
