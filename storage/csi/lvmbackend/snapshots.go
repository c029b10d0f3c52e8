package lvmbackend

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// CreateSnapshot makes a thin snapshot, on the source's node, of a volume
// in a thin device class.
func (b *Controller) CreateSnapshot(ctx context.Context, id backend.VolumeID, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
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
		SnapshotId:     backend.VolumeID{StorageClass: id.StorageClass, Name: lv.Name}.String(),
		SourceVolumeId: req.GetSourceVolumeId(),
		SizeBytes:      lv.Status.CurrentSize.Value(),
		CreationTime:   timestamppb.New(lv.CreationTimestamp.Time),
		ReadyToUse:     true,
	}}, nil
}

// DeleteSnapshot removes the snapshot's LogicalVolume.
func (b *Controller) DeleteSnapshot(ctx context.Context, _ backend.VolumeID, req *csi.DeleteSnapshotRequest) error {
	return b.remove(ctx, req.GetSnapshotId(), kindSnapshot)
}

// GetCapacity is what the class's agents write on their Nodes: one node's
// when the topology names it, the sum over all nodes otherwise.
func (b *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
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
		if n, ok := req.GetAccessibleTopology().GetSegments()[backend.TopologyKey]; ok && n != node {
			continue
		}
		total += bytes
		largest = max(largest, bytes)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: total, MaximumVolumeSize: wrapperspb.Int64(largest)}, nil
}

// GetSnapshot reads the snapshot's LogicalVolume.
func (b *Controller) GetSnapshot(ctx context.Context, _ backend.VolumeID, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	lv, err := b.lookup(ctx, req.GetSnapshotId(), kindSnapshot)
	if err != nil {
		return nil, err
	}
	var source backend.VolumeID
	volume := &storagev1alpha1.LogicalVolume{}
	err = b.Cache.Get(ctx, client.ObjectKey{Name: lv.Spec.Source}, volume)
	if err == nil {
		source = logicalVolumeID(volume)
	}
	snap := logicalSnapshot(lv, source, err == nil)
	snap.SnapshotId = req.GetSnapshotId() // the ID the CO holds names it, whatever its volume became
	return &csi.GetSnapshotResponse{Snapshot: snap}, nil
}

// logicalSnapshot is an LVM snapshot as CSI names it: under its source
// volume's StorageClass, as CreateSnapshot named it. A snapshot whose
// volume is gone is named after its device class's StorageClass.
func logicalSnapshot(lv *storagev1alpha1.LogicalVolume, source backend.VolumeID, sourceKnown bool) *csi.Snapshot {
	if !sourceKnown {
		source = backend.VolumeID{StorageClass: storagev1alpha1.StorageClassName(lv.Spec.DeviceClass), Name: lv.Spec.Source}
	}
	ready, _ := readiness(lv)
	snap := &csi.Snapshot{
		SnapshotId:     backend.VolumeID{StorageClass: source.StorageClass, Name: lv.Name}.String(),
		SourceVolumeId: source.String(),
		CreationTime:   timestamppb.New(lv.CreationTimestamp.Time),
		ReadyToUse:     ready,
	}
	if lv.Status.CurrentSize != nil {
		snap.SizeBytes = lv.Status.CurrentSize.Value()
	}
	return snap
}
