package csi

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/controller-runtime/pkg/log"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// ListVolumes implements csi.ControllerServer: the volumes of both
// backends, ordered by ID.
func (c *Controller) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	entries, err := listAll(ctx, c.backends(), backend.listVolumes)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b *csi.ListVolumesResponse_Entry) int {
		return strings.Compare(a.GetVolume().GetVolumeId(), b.GetVolume().GetVolumeId())
	})
	entries, next, err := page(entries, req.GetStartingToken(), req.GetMaxEntries(), "volumes")
	return &csi.ListVolumesResponse{Entries: entries, NextToken: next}, err
}

// ListSnapshots implements csi.ControllerServer: the snapshots of both
// backends, ordered by ID, or the one snapshot_id names, or those of
// source_volume_id. An ID that names nothing gives an empty list.
func (c *Controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	snaps, err := listAll(ctx, c.backends(), backend.listSnapshots)
	if err != nil {
		return nil, err
	}
	snaps = slices.DeleteFunc(snaps, func(s *csi.Snapshot) bool {
		id, source := req.GetSnapshotId(), req.GetSourceVolumeId()
		return (id != "" && s.GetSnapshotId() != id) || (source != "" && s.GetSourceVolumeId() != source)
	})
	slices.SortFunc(snaps, func(a, b *csi.Snapshot) int { return strings.Compare(a.GetSnapshotId(), b.GetSnapshotId()) })
	snaps, next, err := page(snaps, req.GetStartingToken(), req.GetMaxEntries(), "snapshots")
	if err != nil {
		return nil, err
	}
	rsp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, s := range snaps {
		rsp.Entries = append(rsp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: s})
	}
	return rsp, nil
}

// listAll lists what every backend holds. A backend that cannot be read
// (an agent down) is left out and logged, so that it does not hide what
// the others hold; only when none can be read is the call an error.
func listAll[T any](ctx context.Context, backends []backend, list func(backend, context.Context) ([]T, error)) ([]T, error) {
	var all []T
	var errs []error
	for _, b := range backends {
		items, err := list(b, ctx)
		if err != nil {
			log.FromContext(ctx).Error(err, "listing one backend's volumes; the others are listed")
			errs = append(errs, err)
			continue
		}
		all = append(all, items...)
	}
	if len(errs) == len(backends) {
		return nil, errs[0] // a status, whose code the CO acts on
	}
	return all, nil
}

// page is the part of a sorted list a call asks for. The token is the
// index of the next entry; max 0 means all.
func page[T any](all []T, token string, max int32, what string) ([]T, string, error) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > len(all) {
			return nil, "", status.Errorf(codes.Aborted, "starting token %q is not one this driver gave for the %d %s there are", token, len(all), what)
		}
		start = n
	}
	if max < 0 {
		return nil, "", status.Errorf(codes.InvalidArgument, "max entries %d is negative", max)
	}
	end := len(all)
	if n := int(max); n > 0 && start+n < end {
		end = start + n
	}
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

// listVolumes lists the LVM volumes made through CSI.
func (b *lvmBackend) listVolumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error) {
	lvs, err := b.logicalVolumes(ctx, kindVolume)
	if err != nil {
		return nil, err
	}
	var entries []*csi.ListVolumesResponse_Entry
	for _, lv := range lvs {
		entries = append(entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
			VolumeId:           logicalVolumeID(&lv).String(),
			CapacityBytes:      lv.Spec.Size.Value(),
			AccessibleTopology: []*csi.Topology{{Segments: map[string]string{TopologyKey: lv.Spec.NodeName}}},
		}})
	}
	return entries, nil
}

// listSnapshots lists the LVM snapshots made through CSI, each
// under its source volume's StorageClass, as CreateSnapshot names them.
func (b *lvmBackend) listSnapshots(ctx context.Context) ([]*csi.Snapshot, error) {
	volumes, err := b.logicalVolumes(ctx, kindVolume)
	if err != nil {
		return nil, err
	}
	sourceIDs := map[string]VolumeID{}
	for _, lv := range volumes {
		sourceIDs[lv.Name] = logicalVolumeID(&lv)
	}
	snaps, err := b.logicalVolumes(ctx, kindSnapshot)
	if err != nil {
		return nil, err
	}
	var out []*csi.Snapshot
	for _, lv := range snaps {
		source, ok := sourceIDs[lv.Spec.Source]
		out = append(out, logicalSnapshot(&lv, source, ok))
	}
	return out, nil
}

// GetSnapshot implements csi.ControllerServer.
func (c *Controller) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := required("snapshot ID", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetSnapshotId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.GetSnapshot(ctx, id, req)
}

// GetSnapshot reads the snapshot's LogicalVolume.
func (b *lvmBackend) GetSnapshot(ctx context.Context, _ VolumeID, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	lv, err := b.lookup(ctx, req.GetSnapshotId(), kindSnapshot)
	if err != nil {
		return nil, err
	}
	var source VolumeID
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
func logicalSnapshot(lv *storagev1alpha1.LogicalVolume, source VolumeID, sourceKnown bool) *csi.Snapshot {
	if !sourceKnown {
		source = VolumeID{StorageClass: storagev1alpha1.StorageClassName(lv.Spec.DeviceClass), Name: lv.Spec.Source}
	}
	ready, _ := readiness(lv)
	snap := &csi.Snapshot{
		SnapshotId:     VolumeID{StorageClass: source.StorageClass, Name: lv.Name}.String(),
		SourceVolumeId: source.String(),
		CreationTime:   timestamppb.New(lv.CreationTimestamp.Time),
		ReadyToUse:     ready,
	}
	if lv.Status.CurrentSize != nil {
		snap.SizeBytes = lv.Status.CurrentSize.Value()
	}
	return snap
}

func (b *lvmBackend) logicalVolumes(ctx context.Context, kind string) ([]storagev1alpha1.LogicalVolume, error) {
	lvs := &storagev1alpha1.LogicalVolumeList{}
	if err := b.Cache.List(ctx, lvs, client.MatchingLabels{KindLabel: kind}); err != nil {
		return nil, apiError(err, "list")
	}
	return lvs.Items, nil
}

// logicalVolumeID is the CSI ID of an LVM volume.
func logicalVolumeID(lv *storagev1alpha1.LogicalVolume) VolumeID {
	sc := lv.Annotations[StorageClassAnnotation]
	if sc == "" {
		sc = storagev1alpha1.StorageClassName(lv.Spec.DeviceClass)
	}
	return VolumeID{StorageClass: sc, Name: lv.Name}
}
