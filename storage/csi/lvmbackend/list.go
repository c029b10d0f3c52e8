package lvmbackend

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// listVolumes lists the LVM volumes made through CSI.
func (b *Controller) Volumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error) {
	lvs, err := b.logicalVolumes(ctx, kindVolume)
	if err != nil {
		return nil, err
	}
	var entries []*csi.ListVolumesResponse_Entry
	for _, lv := range lvs {
		entries = append(entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
			VolumeId:           logicalVolumeID(&lv).String(),
			CapacityBytes:      lv.Spec.Size.Value(),
			AccessibleTopology: []*csi.Topology{{Segments: map[string]string{backend.TopologyKey: lv.Spec.NodeName}}},
		}})
	}
	return entries, nil
}

// listSnapshots lists the LVM snapshots made through CSI, each
// under its source volume's StorageClass, as CreateSnapshot names them.
func (b *Controller) Snapshots(ctx context.Context) ([]*csi.Snapshot, error) {
	volumes, err := b.logicalVolumes(ctx, kindVolume)
	if err != nil {
		return nil, err
	}
	sourceIDs := map[string]backend.VolumeID{}
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

func (b *Controller) logicalVolumes(ctx context.Context, kind string) ([]storagev1alpha1.LogicalVolume, error) {
	lvs := &storagev1alpha1.LogicalVolumeList{}
	if err := b.Cache.List(ctx, lvs, client.MatchingLabels{KindLabel: kind}); err != nil {
		return nil, apiError(err, "list")
	}
	return lvs.Items, nil
}

// logicalVolumeID is the CSI ID of an LVM volume.
func logicalVolumeID(lv *storagev1alpha1.LogicalVolume) backend.VolumeID {
	sc := lv.Annotations[StorageClassAnnotation]
	if sc == "" {
		sc = storagev1alpha1.StorageClassName(lv.Spec.DeviceClass)
	}
	return backend.VolumeID{StorageClass: sc, Name: lv.Name}
}
