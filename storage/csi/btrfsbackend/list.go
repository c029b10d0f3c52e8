package btrfsbackend

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	storagev1 "k8s.io/api/storage/v1"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// eachAgent calls do once for every agent and tenant of the btrfs
// StorageClasses: classes that share both see the same volumes, which are
// given once, under the first class by name.
func (b *Controller) eachAgent(ctx context.Context, do func(sc *storagev1.StorageClass, agent *volumeapi.Client) error) error {
	classes := &storagev1.StorageClassList{}
	if err := b.Cache.List(ctx, classes); err != nil {
		return status.Errorf(codes.Unavailable, "listing StorageClasses: %v", err)
	}
	seen := map[string]bool{}
	for _, sc := range classes.Items {
		if sc.Provisioner != storagev1alpha1.CSIDriver || !rules.IsBtrfsClass(sc.Parameters) {
			continue
		}
		agent, err := b.agent(ctx, &sc, nil)
		if err != nil {
			return err
		}
		key := agent.URL + "\x00" + agent.Token
		if seen[key] {
			continue
		}
		seen[key] = true
		if err := do(&sc, agent); err != nil {
			return err
		}
	}
	return nil
}

// listVolumes lists the volumes of every btrfs StorageClass's tenant.
func (b *Controller) Volumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error) {
	var entries []*csi.ListVolumesResponse_Entry
	err := b.eachAgent(ctx, func(sc *storagev1.StorageClass, agent *volumeapi.Client) error {
		vs, err := agent.ListVolumes(ctx)
		if err != nil {
			return agentError(err, fmt.Sprintf("listing the volumes of StorageClass %s", sc.Name))
		}
		for _, v := range vs {
			entries = append(entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
				VolumeId: backend.VolumeID{StorageClass: sc.Name, Name: v.Name}.String(), CapacityBytes: v.SizeBytes,
				VolumeContext: rules.BtrfsVolumeContext()}})
		}
		return nil
	})
	return entries, err
}

// listSnapshots lists the snapshots of every btrfs StorageClass's tenant.
func (b *Controller) Snapshots(ctx context.Context) ([]*csi.Snapshot, error) {
	var snaps []*csi.Snapshot
	err := b.eachAgent(ctx, func(sc *storagev1.StorageClass, agent *volumeapi.Client) error {
		list, err := agent.ListSnapshots(ctx, "")
		if err != nil {
			return agentError(err, fmt.Sprintf("listing the snapshots of StorageClass %s", sc.Name))
		}
		for _, snap := range list {
			snaps = append(snaps, btrfsSnapshot(sc.Name, snap))
		}
		return nil
	})
	return snaps, err
}

// btrfsSnapshot is a snapshot of a class's agent as CSI names it.
func btrfsSnapshot(class string, snap wire.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     backend.VolumeID{StorageClass: class, Name: snap.Name}.String(),
		SourceVolumeId: backend.VolumeID{StorageClass: class, Name: snap.Volume}.String(),
		SizeBytes:      snap.SizeBytes, CreationTime: timestamppb.New(snap.CreatedAt), ReadyToUse: true,
	}
}
