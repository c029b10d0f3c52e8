package volumegroups

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/lvm"
)

// describe fills the class's sizes, devices and pool usage, and returns
// the capacity a new volume of the class can have on this node.
func (r *Reconciler) describe(ctx context.Context, dc storagev1alpha1.DeviceClass, st *storagev1alpha1.DeviceClassNodeStatus) (uint64, error) {
	vg, err := lvm.FindVolumeGroupOf(ctx, r.LVM, dc.Name)
	if err != nil {
		return 0, err
	}
	st.Size, st.Free = bytesQuantity(vg.Size), bytesQuantity(vg.Free)
	st.Devices = vg.Devices
	if dc.ThinPoolConfig == nil {
		return vg.Free, nil
	}
	lvs, err := r.LVM.LogicalVolumes(ctx, dc.Name)
	if err != nil {
		return 0, err
	}
	pool, ok := lvm.Named(lvs, dc.ThinPoolConfig.Name)
	if !ok {
		return 0, fmt.Errorf("thin pool %s/%s vanished right after it was ensured (removed outside strata?); the next reconcile makes it again",
			dc.Name, dc.ThinPoolConfig.Name)
	}
	st.ThinPool = &storagev1alpha1.ThinPoolStatus{Name: pool.Name, Size: bytesQuantity(pool.Size),
		DataPercent: fmt.Sprintf("%.2f", pool.DataPercent), MetadataPercent: fmt.Sprintf("%.2f", pool.MetadataPercent)}
	if full := r.fullness(pool); full != "" {
		st.ThinPool.Full = full
		return 0, nil
	}
	return thinCapacity(pool, lvs, dc.ThinPoolConfig.OverprovisionRatio), nil
}

// fullness says why no new thin volume may go into the pool, if so: its
// data or metadata is fuller than the threshold. Overprovisioning alone
// would keep offering a pool that is about to run out (TopoLVM #1101).
func (r *Reconciler) fullness(pool lvm.LogicalVolume) string {
	limit := r.FullThreshold
	if limit == 0 {
		limit = 90
	}
	switch {
	case pool.DataPercent >= limit:
		return fmt.Sprintf("data %.1f%% full (threshold %.0f%%): no new thin volumes here", pool.DataPercent, limit)
	case pool.MetadataPercent >= limit:
		return fmt.Sprintf("metadata %.1f%% full (threshold %.0f%%): no new thin volumes here", pool.MetadataPercent, limit)
	}
	return ""
}

// ReasonThinPoolFull is the reason of the event on an LVMCluster when a
// node's thin pool passes the full threshold (docs/notifications.md).
const ReasonThinPoolFull = "ThinPoolFull"

// tellNewlyFull records ThinPoolFull on the cluster when the class's pool
// on this node has just passed the threshold: once, not each resync.
func (r *Reconciler) tellNewlyFull(cluster *storagev1alpha1.LVMCluster, before []storagev1alpha1.DeviceClassNodeStatus, now storagev1alpha1.DeviceClassNodeStatus) {
	if now.ThinPool == nil || now.ThinPool.Full == "" {
		return
	}
	for _, b := range before {
		if b.VolumeGroup == now.VolumeGroup && b.ThinPool != nil && b.ThinPool.Full != "" {
			return
		}
	}
	r.event(cluster, corev1.EventTypeWarning, ReasonThinPoolFull, "thin pool %s/%s on node %s: %s",
		now.VolumeGroup, now.ThinPool.Name, r.Node, now.ThinPool.Full)
}

// thinCapacity is the pool's overprovisioned size less what its volumes
// were promised.
func thinCapacity(pool lvm.LogicalVolume, lvs []lvm.LogicalVolume, ratio int32) uint64 {
	if ratio < 1 {
		ratio = 10
	}
	total := pool.Size * uint64(ratio)
	var promised uint64
	for _, lv := range lvs {
		if lv.Kind == lvm.Thin && lv.Pool == pool.Name {
			promised += lv.Size
		}
	}
	return total - min(promised, total)
}

func (r *Reconciler) minSize() uint64 {
	if r.MinDeviceSize == 0 {
		return 1 << 30
	}
	return r.MinDeviceSize
}

func (r *Reconciler) event(obj client.Object, kind, reason, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(obj, nil, kind, reason, reason, format, args...)
	}
}

func quantityBytes(q *resource.Quantity) uint64 {
	if q == nil {
		return 0
	}
	return uint64(q.Value())
}

func bytesQuantity(n uint64) *resource.Quantity {
	return resource.NewQuantity(int64(n), resource.BinarySI)
}

// DefaultCapacityGrace is how long a failing class keeps its capacity on
// the Node: two resyncs, so that one failed lvm2 command (a lock held by
// another tool, a device slow to answer) does not make the scheduler see
// no room on the node, while a class that stays broken stops being
// offered new volumes.
const DefaultCapacityGrace = 2 * resyncPeriod

// keepRecentCapacity carries a failing class's capacity on node over into
// capacity while the class has failed, since the time given, for less
// than the grace.
func (r *Reconciler) keepRecentCapacity(node *corev1.Node, class string, since time.Time, capacity map[string]uint64) {
	grace := r.CapacityGrace
	if grace == 0 {
		grace = DefaultCapacityGrace
	}
	if time.Since(since) >= grace {
		return
	}
	if last, err := strconv.ParseUint(node.Annotations[storagev1alpha1.CapacityAnnotationPrefix+class], 10, 64); err == nil {
		capacity[class] = last
	}
}

// annotateCapacity writes each class's capacity on the Node and drops
// the annotations of classes no longer here.
func (r *Reconciler) annotateCapacity(ctx context.Context, node *corev1.Node, capacity map[string]uint64) error {
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k := range node.Annotations {
		if strings.HasPrefix(k, storagev1alpha1.CapacityAnnotationPrefix) {
			delete(node.Annotations, k)
		}
	}
	for class, bytes := range capacity {
		node.Annotations[storagev1alpha1.CapacityAnnotationPrefix+class] = fmt.Sprint(bytes)
	}
	return r.Patch(ctx, node, patch)
}
