package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// CreateSnapshot implements csi.ControllerServer, by the source volume's
// backend.
func (c *Controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := required("name", req.GetName(), "source volume ID", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetSourceVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.CreateSnapshot(ctx, id, req)
}

// CreateSnapshot makes a thin snapshot, on the source's node, of a volume
// in a thin device class.
func (b *lvmBackend) CreateSnapshot(ctx context.Context, id VolumeID, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	source, err := b.lookup(ctx, req.GetSourceVolumeId(), kindVolume)
	if err != nil {
		return nil, err
	}
	class, err := findClass(ctx, b.Cache, source.Spec.DeviceClass)
	if err != nil {
		return nil, err
	}
	if class.ThinPoolConfig == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is in device class %s, which is thick: snapshots need a class with a thinPoolConfig",
			req.GetSourceVolumeId(), class.Name)
	}
	want := newLogicalVolume(req.GetName(), kindSnapshot, class.Name, source.Spec.Size)
	want.Spec.NodeName, want.Spec.Source = source.Spec.NodeName, source.Name
	lv, err := b.getOrCreate(ctx, want, nil, nil)
	if err != nil {
		return nil, err
	}
	if lv, err = b.waitReady(ctx, lv); err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId:     VolumeID{StorageClass: id.StorageClass, Name: lv.Name}.String(),
		SourceVolumeId: req.GetSourceVolumeId(),
		SizeBytes:      lv.Status.CurrentSize.Value(),
		CreationTime:   timestamppb.New(lv.CreationTimestamp.Time),
		ReadyToUse:     true,
	}}, nil
}

// DeleteSnapshot implements csi.ControllerServer.
func (c *Controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := required("snapshot ID", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetSnapshotId(), req.GetSecrets())
	if err == nil {
		err = b.DeleteSnapshot(ctx, id, req)
	}
	return &csi.DeleteSnapshotResponse{}, err
}

// DeleteSnapshot removes the snapshot's LogicalVolume.
func (b *lvmBackend) DeleteSnapshot(ctx context.Context, _ VolumeID, req *csi.DeleteSnapshotRequest) error {
	return b.remove(ctx, req.GetSnapshotId(), kindSnapshot)
}

// GetCapacity implements csi.ControllerServer, by the class's backend.
func (c *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return c.byParameters(req.GetParameters()).GetCapacity(ctx, req)
}

// GetCapacity is what the class's agents write on their Nodes: one node's
// when the topology names it, the sum over all nodes otherwise.
func (b *lvmBackend) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	name := req.GetParameters()[storagev1alpha1.DeviceClassParameter]
	class, err := findClass(ctx, b.Cache, name)
	if name == "" && status.Code(err) == codes.InvalidArgument {
		// No default class: a volume without parameters has no room anywhere.
		return &csi.GetCapacityResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	capacity, err := nodeCapacity(ctx, b.Cache, class.Name)
	if err != nil {
		return nil, err
	}
	var total, largest int64
	for node, bytes := range capacity {
		if n, ok := req.GetAccessibleTopology().GetSegments()[TopologyKey]; ok && n != node {
			continue
		}
		total += bytes
		largest = max(largest, bytes)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: total, MaximumVolumeSize: wrapInt64(largest)}, nil
}
