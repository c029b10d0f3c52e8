package volumegroups

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/lvm"
)

// ensureGroup creates the tagged group or extends it; it never removes a
// device from it.
func (r *Reconciler) ensureGroup(ctx context.Context, cluster *storagev1alpha1.LVMCluster, name string, vg lvm.VolumeGroup, usable []string) error {
	if vg.Name == "" {
		if len(usable) == 0 {
			return fmt.Errorf("no usable device for volume group %s: every device considered is listed in excluded with why; "+
				"free one of them or add another to deviceSelector.paths", name)
		}
		if err := r.LVM.CreateVolumeGroup(ctx, name, usable, []string{ManagedTag, r.namespaceTag(), clusterTag(cluster.Name)}); err != nil {
			return err
		}
		r.event(cluster, corev1.EventTypeNormal, "VolumeGroupCreated", "created volume group %s on %s from %s", name, r.Node, strings.Join(usable, ", "))
		return nil
	}
	if len(usable) == 0 {
		return nil
	}
	if err := r.LVM.ExtendVolumeGroup(ctx, name, usable); err != nil {
		return err
	}
	r.event(cluster, corev1.EventTypeNormal, "VolumeGroupExtended", "extended volume group %s on %s with %s", name, r.Node, strings.Join(usable, ", "))
	return nil
}

// ensureThinPool creates the pool at sizePercent of the group, grows its
// data when the group grew and its metadata when the spec asks for more.
func (r *Reconciler) ensureThinPool(ctx context.Context, vgName string, cfg storagev1alpha1.ThinPoolConfig) error {
	vg, err := lvm.FindVolumeGroupOf(ctx, r.LVM, vgName)
	if err != nil {
		return err
	}
	percent := uint64(cfg.SizePercent)
	if percent == 0 {
		percent = 90
	}
	size := vg.Size * percent / 100 &^ (1<<20 - 1)
	metadata := quantityBytes(cfg.MetadataSize)
	pool, err := lvm.FindVolume(ctx, r.LVM, vgName, cfg.Name)
	if errors.Is(err, lvm.ErrNotFound) {
		return r.LVM.CreateThinPool(ctx, vgName, lvm.ThinPoolSpec{Name: cfg.Name, Size: size, MetadataSize: metadata,
			ChunkSize: quantityBytes(cfg.ChunkSize)})
	}
	if err != nil {
		return err
	}
	grow := max(size, pool.Size)
	if grow-pool.Size > vg.Free { // the metadata's share of a grown group stays free
		grow = pool.Size + vg.Free
	}
	if grow == pool.Size && metadata <= pool.MetadataSize {
		return nil
	}
	return r.LVM.ExtendThinPool(ctx, vgName, cfg.Name, grow, max(metadata, pool.MetadataSize))
}
