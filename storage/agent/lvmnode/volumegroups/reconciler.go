// Package volumegroups is the node side of LVMCluster: on its node it
// turns the device classes into volume groups and thin pools, reports
// them with the node's capacity, and retires the groups whose class went.
// One file per phase: devices (discover, select, wipe), group (volume
// group, thin pool), capacity, retire.
package volumegroups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/disks"
	"github.com/strata-gitops/strata/storage/lvm"
)

// ManagedTag marks the volume groups strata made; no other group is ever
// changed.
const ManagedTag = "strata.dev/managed"

// Reconciler makes the device classes of the LVMClusters in
// Namespace real on its node: a tagged volume group per class, extended
// as devices are added, and its thin pool; it reports them on the node's
// LVMVolumeGroupNodeStatus.
type Reconciler struct {
	client.Client
	Node      string
	Namespace string
	LVM       lvm.Manager
	Disks     *disks.Inspector
	// MinDeviceSize is the smallest device used (default 1 GiB).
	MinDeviceSize uint64
	// DiscoverLoopDir makes loop devices backed by files under it count
	// as disks for classes without paths; empty: loop devices never do.
	DiscoverLoopDir string
	// FullThreshold is the percent of data or metadata use above which a
	// thin pool takes no new volume (default 90).
	FullThreshold float64
	Events        events.EventRecorder
	// NoDeviceMapper says the kernel has no device-mapper, so lvm2 can
	// make no logical volume here: every class fails, saying so.
	NoDeviceMapper bool
	// CapacityGrace is how long a class that fails keeps the capacity it
	// last had on the Node (default DefaultCapacityGrace).
	CapacityGrace time.Duration

	// failingSince holds when each class that failed in the last pass
	// began to fail. Only Reconcile uses it, and controller-runtime never
	// runs two at once for the node's one request.
	failingSince map[string]time.Time
}

// SetupWithManager reconciles the node's whole state on any change of an
// LVMCluster in the namespace or of a LogicalVolume on the node (which
// changes the capacity left), and every resyncPeriod, since pools fill
// as data is written.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	node := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: r.Node}}
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{node}
	})
	later := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.AddAfter(node, volumeBatchDelay) }
	afterVolumes := handler.Funcs{
		CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(q)
		},
		UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(q)
		},
		DeleteFunc: func(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(q)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("volumegroup-"+r.Node).
		Watches(&storagev1alpha1.LVMCluster{}, toNode).
		Watches(&storagev1alpha1.LogicalVolume{}, afterVolumes, builder.WithPredicates(predicate.NewPredicateFuncs(r.onThisNode))).
		Complete(r)
}

// onThisNode passes the LogicalVolumes bound to this node.
func (r *Reconciler) onThisNode(o client.Object) bool {
	lv, ok := o.(*storagev1alpha1.LogicalVolume)
	return ok && lv.Spec.NodeName == r.Node
}

const (
	// resyncPeriod is how often the node's state is read again unasked.
	resyncPeriod = time.Minute
	// volumeBatchDelay gathers a burst of volume changes into one pass,
	// which runs the lvm2 tools, off the volumes' own path.
	volumeBatchDelay = 2 * time.Second
)

// Reconcile converges every device class selected for this node.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: r.Node}, node); err != nil {
		return ctrl.Result{}, fmt.Errorf("node %s: %w", r.Node, err)
	}
	clusters := &storagev1alpha1.LVMClusterList{}
	if err := r.List(ctx, clusters, client.InNamespace(r.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	state, err := r.nodeStatus(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	before := state.DeepCopy()
	state.Status.DeviceClasses = nil
	capacity := map[string]uint64{} // per class, for the Node's annotations
	var failed []string
	failing := map[string]time.Time{} // the classes failing now, since when
	for _, cluster := range clusters.Items {
		for _, dc := range cluster.Spec.Storage.DeviceClasses {
			selected, err := selects(dc.NodeSelector, node)
			if err != nil {
				st := r.failClass(&cluster, dc, "its nodeSelector cannot be evaluated: %v; fix it in LVMCluster %s/%s", err, cluster.Namespace, cluster.Name)
				failed = append(failed, dc.Name)
				state.Status.DeviceClasses = append(state.Status.DeviceClasses, st)
				continue
			}
			if !selected {
				continue
			}
			st := r.reconcileClass(ctx, &cluster, dc, &state.Status, capacity)
			r.tellNewlyFull(&cluster, before.Status.DeviceClasses, st)
			if st.State == storagev1alpha1.StateFailed {
				failed = append(failed, dc.Name)
				failing[dc.Name] = r.failingSince[dc.Name]
				if failing[dc.Name].IsZero() {
					failing[dc.Name] = time.Now()
				}
				r.keepRecentCapacity(node, dc.Name, failing[dc.Name], capacity)
			}
			state.Status.DeviceClasses = append(state.Status.DeviceClasses, st)
		}
	}
	r.failingSince = failing
	if state.Status.Unclaimed, err = r.unclaimed(ctx, state.Status.DeviceClasses); err != nil {
		return ctrl.Result{}, err
	}
	if state.Status.Retained, err = r.retain(ctx, clusters.Items, state); err != nil {
		return ctrl.Result{}, err
	}
	for _, g := range state.Status.Retained {
		if !slices.ContainsFunc(before.Status.Retained, func(b storagev1alpha1.RetainedGroup) bool { return b.Name == g.Name }) {
			r.event(state, corev1.EventTypeWarning, "VolumeGroupRetained", "volume group %s on %s: %s", g.Name, r.Node, g.Reason)
		}
	}
	for _, u := range state.Status.Unclaimed {
		if !slices.Contains(before.Status.Unclaimed, u) {
			r.event(state, corev1.EventTypeWarning, "UnclaimedVolume",
				"logical volume %s on %s is claimed by no LogicalVolume; strata leaves it alone (remove it with lvremove if it is garbage)", u, r.Node)
		}
	}
	if err := r.Status().Patch(ctx, state, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.annotateCapacity(ctx, node, capacity); err != nil {
		return ctrl.Result{}, err
	}
	if len(failed) > 0 {
		return ctrl.Result{}, fmt.Errorf("device classes %s failed on node %s (see LVMVolumeGroupNodeStatus %s/%s)",
			strings.Join(failed, ", "), r.Node, r.Namespace, r.Node)
	}
	return ctrl.Result{RequeueAfter: resyncPeriod}, nil
}

// nodeStatus returns the node's status object, creating it.
func (r *Reconciler) nodeStatus(ctx context.Context) (*storagev1alpha1.LVMVolumeGroupNodeStatus, error) {
	st := &storagev1alpha1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: r.Node, Namespace: r.Namespace}}
	err := r.Get(ctx, client.ObjectKeyFromObject(st), st)
	if err == nil || !apierrors.IsNotFound(err) {
		return st, err
	}
	return st, r.Create(ctx, st)
}

// selects says whether a class's nodeSelector picks node; a selector
// that cannot be parsed is an error, not a silent "no".
func selects(sel *corev1.NodeSelector, node *corev1.Node) (bool, error) {
	if sel == nil || len(sel.NodeSelectorTerms) == 0 {
		return true, nil
	}
	return nodeaffinity.NewLazyErrorNodeSelector(sel).Match(node)
}

// failClass is the status of a class that failed before anything was
// looked at on the node, with an event on its LVMCluster.
func (r *Reconciler) failClass(cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass, format string, args ...any) storagev1alpha1.DeviceClassNodeStatus {
	st := storagev1alpha1.DeviceClassNodeStatus{Node: r.Node, VolumeGroup: dc.Name, State: storagev1alpha1.StateFailed, Reason: fmt.Sprintf(format, args...)}
	r.event(cluster, corev1.EventTypeWarning, "DeviceClassFailed", "%s on %s: %s", dc.Name, r.Node, st.Reason)
	return st
}

// reconcileClass converges one class, notes the capacity a new volume of
// it can have here, and says how the class stands.
func (r *Reconciler) reconcileClass(ctx context.Context, cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass,
	node *storagev1alpha1.NodeStatus, capacity map[string]uint64) storagev1alpha1.DeviceClassNodeStatus {
	st := storagev1alpha1.DeviceClassNodeStatus{Node: r.Node, VolumeGroup: dc.Name}
	fail := func(format string, args ...any) storagev1alpha1.DeviceClassNodeStatus {
		failed := r.failClass(cluster, dc, format, args...)
		st.State, st.Reason = failed.State, failed.Reason
		return st
	}
	if r.NoDeviceMapper {
		return fail("node %s's kernel has no device-mapper, so lvm2 can make no logical volume here: load dm_mod (modprobe dm_mod); "+
			"strata never falls back to loop files on its own (--backend loopback names them, for development machines)", r.Node)
	}
	vg, err := lvm.FindVolumeGroupOf(ctx, r.LVM, dc.Name)
	switch {
	case err == nil && !vg.HasTag(ManagedTag):
		return fail("volume group %s exists and is not strata's (no %s tag); strata never changes it", dc.Name, ManagedTag)
	case err != nil && !errors.Is(err, lvm.ErrNotFound):
		return fail("%v", err)
	}
	usable, err := r.usableDevices(ctx, cluster, dc, node, &st)
	if err != nil {
		return fail("%v", err)
	}
	if err := r.ensureGroup(ctx, cluster, dc.Name, vg, usable); err != nil {
		return fail("%v", err)
	}
	if dc.ThinPoolConfig != nil {
		if err := r.ensureThinPool(ctx, dc.Name, *dc.ThinPoolConfig); err != nil {
			return fail("%v", err)
		}
	}
	free, err := r.describe(ctx, dc, &st)
	if err != nil {
		return fail("%v", err)
	}
	capacity[dc.Name] = free
	st.Unselected = unselected(dc, st.Devices)
	st.State = storagev1alpha1.StateReady
	return st
}
