package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/disks"
	"github.com/strata-gitops/strata/storage/lvm"
)

// ManagedTag marks the volume groups strata made; no other group is ever
// changed.
const ManagedTag = "strata.dev/managed"

// Node states of a device class.
const (
	StateReady  = "Ready"
	StateFailed = "Failed"
)

// VolumeGroupReconciler makes the device classes of the LVMClusters in
// Namespace real on its node: a tagged volume group per class, extended
// as devices are added, and its thin pool; it reports them on the node's
// LVMVolumeGroupNodeStatus.
type VolumeGroupReconciler struct {
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

	capacity map[string]uint64 // per class, from the current reconcile
}

// SetupWithManager reconciles the node's whole state on any change of an
// LVMCluster in the namespace or of a LogicalVolume on the node (which
// changes the capacity left), and every resyncPeriod, since pools fill
// as data is written.
func (r *VolumeGroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
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
		Watches(&storagev1alpha1.LogicalVolume{}, afterVolumes, builder.WithPredicates(onNode(r.Node))).
		Complete(r)
}

const (
	// resyncPeriod is how often the node's state is read again unasked.
	resyncPeriod = time.Minute
	// volumeBatchDelay gathers a burst of volume changes into one pass,
	// which runs the lvm2 tools, off the volumes' own path.
	volumeBatchDelay = 2 * time.Second
)

// Reconcile converges every device class selected for this node.
func (r *VolumeGroupReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
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
	r.capacity = map[string]uint64{}
	var failed []string
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
			st := r.reconcileClass(ctx, &cluster, dc, &state.Status)
			if st.State == StateFailed {
				failed = append(failed, dc.Name)
			}
			state.Status.DeviceClasses = append(state.Status.DeviceClasses, st)
		}
	}
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
	if err := r.annotateCapacity(ctx, node); err != nil {
		return ctrl.Result{}, err
	}
	if len(failed) > 0 {
		return ctrl.Result{}, fmt.Errorf("device classes %s failed on node %s (see LVMVolumeGroupNodeStatus %s/%s)",
			strings.Join(failed, ", "), r.Node, r.Namespace, r.Node)
	}
	return ctrl.Result{RequeueAfter: resyncPeriod}, nil
}

// nodeStatus returns the node's status object, creating it.
func (r *VolumeGroupReconciler) nodeStatus(ctx context.Context) (*storagev1alpha1.LVMVolumeGroupNodeStatus, error) {
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
func (r *VolumeGroupReconciler) failClass(cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass, format string, args ...any) storagev1alpha1.DeviceClassNodeStatus {
	st := storagev1alpha1.DeviceClassNodeStatus{Node: r.Node, VolumeGroup: dc.Name, State: StateFailed, Reason: fmt.Sprintf(format, args...)}
	r.event(cluster, corev1.EventTypeWarning, "DeviceClassFailed", "%s on %s: %s", dc.Name, r.Node, st.Reason)
	return st
}

// reconcileClass converges one class and says how it stands.
func (r *VolumeGroupReconciler) reconcileClass(ctx context.Context, cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass,
	node *storagev1alpha1.NodeStatus) storagev1alpha1.DeviceClassNodeStatus {
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
	capacity, err := r.describe(ctx, dc, &st)
	if err != nil {
		return fail("%v", err)
	}
	r.capacity[dc.Name] = capacity
	st.Unselected = unselected(dc, st.Devices)
	st.State = StateReady
	return st
}

// usableDevices inspects the class's devices, wipes those the opt-in
// allows (once each) and returns the ones to put in the group. A required
// path that cannot be used fails the class.
func (r *VolumeGroupReconciler) usableDevices(ctx context.Context, cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass,
	node *storagev1alpha1.NodeStatus, st *storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	sel := dc.DeviceSelector
	if sel == nil {
		sel = &storagev1alpha1.DeviceSelector{}
	}
	groups, err := r.LVM.VolumeGroups(ctx)
	if err != nil {
		return nil, err
	}
	policy := disks.Policy{MinSize: r.minSize(), ManagedTag: ManagedTag}
	if len(sel.Paths)+len(sel.OptionalPaths) == 0 {
		if sel.DiscoverBlankDisks == nil || !*sel.DiscoverBlankDisks {
			return nil, fmt.Errorf("device class %s names no disks: list them in deviceSelector.paths (by id, /dev/disk/by-id/...), "+
				"or set deviceSelector.discoverBlankDisks: true to take every blank disk of the node", dc.Name)
		}
		return r.discovered(ctx, dc, policy, groups, st)
	}
	return r.selected(ctx, cluster, dc, sel, policy, groups, node, st)
}

// selected inspects the paths the class names: a required one that is
// missing or refused fails the class; a refused one is wiped when the
// class allows it and a wipe cures it, once per device.
func (r *VolumeGroupReconciler) selected(ctx context.Context, cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass,
	sel *storagev1alpha1.DeviceSelector, policy disks.Policy, groups []lvm.VolumeGroup,
	node *storagev1alpha1.NodeStatus, st *storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	force := sel.ForceWipeDevicesAndDestroyAllData != nil && *sel.ForceWipeDevicesAndDestroyAllData
	var usable, missingRequired []string
	consider := func(path string, required bool) error {
		d, problem := r.inspect(ctx, path)
		if problem != "" {
			if problem != notFound { // there, but not readable as a disk
				st.Excluded = append(st.Excluded, storagev1alpha1.ExcludedDevice{Name: path, Reasons: []string{problem}})
			}
			if required {
				missingRequired = append(missingRequired, path+": "+problem)
			}
			return nil // an absent optional path is simply not used yet
		}
		if d.VolumeGroup == dc.Name {
			return nil // already in the group
		}
		why := disks.Refusals(d, policy, groups)
		if len(why) > 0 && force && len(disks.Refusals(d, withForce(policy), groups)) == 0 {
			if wipedBefore(node, d) {
				why = append(why, "wiped once before and holds data again; strata wipes a device only once")
			} else {
				var err error
				if why, err = r.wipe(ctx, cluster, d, node); err != nil {
					return err
				}
			}
		}
		if len(why) > 0 {
			st.Excluded = append(st.Excluded, storagev1alpha1.ExcludedDevice{Name: path, Reasons: why})
			if required {
				missingRequired = append(missingRequired, path+": "+strings.Join(why, "; "))
			}
			return nil
		}
		usable = append(usable, d.Path)
		return nil
	}
	for _, p := range sel.Paths {
		if err := consider(string(p), true); err != nil {
			return nil, err
		}
	}
	for _, p := range sel.OptionalPaths {
		if err := consider(string(p), false); err != nil {
			return nil, err
		}
	}
	if len(missingRequired) > 0 {
		return nil, fmt.Errorf("required devices cannot be used: %s", strings.Join(missingRequired, "; "))
	}
	return usable, nil
}

const notFound = "not found"

// inspect reads the device at path, or says why it cannot: notFound, or
// why what is there cannot be read as a disk.
func (r *VolumeGroupReconciler) inspect(ctx context.Context, path string) (disks.Device, string) {
	found, err := r.Disks.Devices(ctx, path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && len(found) == 0:
		return disks.Device{}, notFound
	case err != nil:
		return disks.Device{}, "cannot be inspected: " + err.Error()
	}
	return found[0], ""
}

// unselected lists the group's devices that the class's paths no longer
// name. A class without paths names none, so it has none.
func unselected(dc storagev1alpha1.DeviceClass, devices []string) []string {
	sel := dc.DeviceSelector
	if sel == nil || len(sel.Paths)+len(sel.OptionalPaths) == 0 {
		return nil
	}
	named := map[string]bool{}
	for _, p := range append(slices.Clone(sel.Paths), sel.OptionalPaths...) {
		named[string(p)] = true
		if real, err := filepath.EvalSymlinks(string(p)); err == nil {
			named[real] = true
		}
	}
	var out []string
	for _, d := range devices {
		if !named[d] {
			out = append(out, d)
		}
	}
	return out
}

// discovered picks, for a class that opts in to discovery, every blank
// disk of the node: no partitions, signatures, mounts, holders or loop
// mappings, and neither / nor /boot on it. A disk joins the group by its
// /dev/disk/by-id path where udev made one. It is never wiped, whatever forceWipeDevicesAndDestroyAllData
// says: only a disk named in Git is. Each disk looked at and not taken is
// listed with why.
func (r *VolumeGroupReconciler) discovered(ctx context.Context, dc storagev1alpha1.DeviceClass, policy disks.Policy,
	groups []lvm.VolumeGroup, st *storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	found, err := r.Disks.Candidates(ctx, r.DiscoverLoopDir)
	if err != nil {
		return nil, err
	}
	policy.Discovered = true
	var usable []string
	for _, d := range found {
		if d.VolumeGroup == dc.Name {
			continue // already in the group
		}
		if why := disks.Refusals(d, policy, groups); len(why) > 0 {
			st.Excluded = append(st.Excluded, storagev1alpha1.ExcludedDevice{Name: d.Path, Reasons: why})
			continue
		}
		usable = append(usable, cmp.Or(d.StablePath, d.Path))
	}
	return usable, nil
}

func withForce(p disks.Policy) disks.Policy {
	p.ForceWipe = true
	return p
}

// wipedBefore says whether d was wiped on this node before. Wipes are
// remembered by the disk's stable ID: after a reboot /dev/sdb may be
// another disk, and the wiped one /dev/sdc. A record without an ID (from
// before IDs were kept) matches by path.
func wipedBefore(node *storagev1alpha1.NodeStatus, d disks.Device) bool {
	return slices.ContainsFunc(node.Wiped, func(w storagev1alpha1.WipedDevice) bool {
		if w.ID != "" {
			return w.ID == d.StableID
		}
		return w.Device == d.Path
	})
}

// wipe erases a device's signatures and records the wipe first-hand.
func (r *VolumeGroupReconciler) wipe(ctx context.Context, cluster *storagev1alpha1.LVMCluster, d disks.Device,
	node *storagev1alpha1.NodeStatus) ([]string, error) {
	removed, err := r.Disks.Wipe(ctx, d)
	if err != nil {
		return nil, err
	}
	node.Wiped = append(node.Wiped, storagev1alpha1.WipedDevice{Device: d.Path, ID: d.StableID, At: metav1.Now(), Signatures: removed})
	r.event(cluster, corev1.EventTypeWarning, "DeviceWiped", "wiped %s on %s (forceWipeDevicesAndDestroyAllData): removed %s",
		d.Path, r.Node, strings.Join(removed, ", "))
	return nil, nil
}

// ensureGroup creates the tagged group or extends it; it never removes a
// device from it.
func (r *VolumeGroupReconciler) ensureGroup(ctx context.Context, cluster *storagev1alpha1.LVMCluster, name string, vg lvm.VolumeGroup, usable []string) error {
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
func (r *VolumeGroupReconciler) ensureThinPool(ctx context.Context, vgName string, cfg storagev1alpha1.ThinPoolConfig) error {
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

// describe fills the class's sizes, devices and pool usage, and returns
// the capacity a new volume of the class can have on this node.
func (r *VolumeGroupReconciler) describe(ctx context.Context, dc storagev1alpha1.DeviceClass, st *storagev1alpha1.DeviceClassNodeStatus) (uint64, error) {
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
func (r *VolumeGroupReconciler) fullness(pool lvm.LogicalVolume) string {
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

func (r *VolumeGroupReconciler) minSize() uint64 {
	if r.MinDeviceSize == 0 {
		return 1 << 30
	}
	return r.MinDeviceSize
}

func (r *VolumeGroupReconciler) event(obj client.Object, kind, reason, format string, args ...any) {
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

// annotateCapacity writes each class's capacity on the Node and drops
// the annotations of classes no longer here.
func (r *VolumeGroupReconciler) annotateCapacity(ctx context.Context, node *corev1.Node) error {
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k := range node.Annotations {
		if strings.HasPrefix(k, storagev1alpha1.CapacityAnnotationPrefix) {
			delete(node.Annotations, k)
		}
	}
	for class, bytes := range r.capacity {
		node.Annotations[storagev1alpha1.CapacityAnnotationPrefix+class] = fmt.Sprint(bytes)
	}
	return r.Patch(ctx, node, patch)
}

// retain deals with strata's groups on this node whose device class is no
// longer selected for it: each is kept, with its data, and listed with
// why. It is removed only when all of these hold: the LVMCluster that
// made it (its strata.dev/lvmcluster tag) carries
// strata.dev/allow-data-loss: "true", no LogicalVolume object names it,
// and it holds no logical volume but its thin pool. The last is read
// from lvm2 itself: after an etcd restore the objects are gone and the
// data is not.
func (r *VolumeGroupReconciler) retain(ctx context.Context, clusters []storagev1alpha1.LVMCluster,
	state *storagev1alpha1.LVMVolumeGroupNodeStatus) ([]storagev1alpha1.RetainedGroup, error) {
	groups, err := r.LVM.VolumeGroups(ctx)
	if err != nil {
		return nil, err
	}
	var retained []storagev1alpha1.RetainedGroup
	for _, vg := range groups {
		current := slices.ContainsFunc(state.Status.DeviceClasses, func(dc storagev1alpha1.DeviceClassNodeStatus) bool { return dc.VolumeGroup == vg.Name })
		if current || !vg.HasTag(ManagedTag) || !vg.HasTag(r.namespaceTag()) {
			continue // another namespace's agent's, or made before groups carried their namespace
		}
		reason, err := r.whyKeep(ctx, vg, clusters)
		if err != nil {
			return nil, err
		}
		if reason == "" {
			if err := r.removeGroup(ctx, vg, state); err != nil {
				return nil, err
			}
			continue
		}
		retained = append(retained, storagev1alpha1.RetainedGroup{Name: vg.Name, Devices: vg.Devices, Reason: reason})
	}
	return retained, nil
}

// whyKeep says why a group whose class is gone must stay; empty when
// nothing keeps it.
func (r *VolumeGroupReconciler) whyKeep(ctx context.Context, vg lvm.VolumeGroup, clusters []storagev1alpha1.LVMCluster) (string, error) {
	owner := tagValue(vg.Tags, clusterTagPrefix)
	if owner == "" {
		return fmt.Sprintf("its device class is gone from this node; the group and its data are kept (it was made before groups named their LVMCluster, "+
			"so no opt-in removes it: remove it by hand with vgremove %s if it is garbage)", vg.Name), nil
	}
	optIn := slices.ContainsFunc(clusters, func(c storagev1alpha1.LVMCluster) bool {
		return c.Name == owner && c.Annotations[storagev1alpha1.AllowDataLossAnnotation] == "true"
	})
	if !optIn {
		return fmt.Sprintf("its device class is gone from this node; the group and its data are kept (set %s: \"true\" on LVMCluster %s/%s, which made it, to remove them)",
			storagev1alpha1.AllowDataLossAnnotation, r.Namespace, owner), nil
	}
	users, err := r.volumesOf(ctx, vg.Name)
	if err != nil || len(users) > 0 {
		return fmt.Sprintf("LogicalVolumes %s still use it: delete them (their PVCs) first", strings.Join(users, ", ")), err
	}
	lvs, err := r.LVM.LogicalVolumes(ctx, vg.Name)
	if err != nil {
		return "", err
	}
	var held []string
	for _, lv := range lvs {
		if lv.Kind != lvm.ThinPool {
			held = append(held, lv.Name)
		}
	}
	if len(held) > 0 {
		return fmt.Sprintf("it holds logical volumes %s, which may hold data though no LogicalVolume names them; "+
			"remove them by hand with lvremove if they are garbage", strings.Join(held, ", ")), nil
	}
	return "", nil
}

// removeGroup removes a group every check let go, and says so in the log
// and in an event, with what it held.
func (r *VolumeGroupReconciler) removeGroup(ctx context.Context, vg lvm.VolumeGroup, state *storagev1alpha1.LVMVolumeGroupNodeStatus) error {
	owner := tagValue(vg.Tags, clusterTagPrefix)
	ctrl.LoggerFrom(ctx).Info("removing volume group: its device class is gone, its LVMCluster allows data loss, and it holds no volume",
		"volumeGroup", vg.Name, "devices", vg.Devices, "lvmcluster", owner)
	if err := r.LVM.RemoveVolumeGroup(ctx, vg.Name); err != nil {
		return err
	}
	r.event(state, corev1.EventTypeWarning, "VolumeGroupRemoved", "removed volume group %s on %s (devices %s): its device class is gone, it held no volume, and LVMCluster %s sets %s",
		vg.Name, r.Node, strings.Join(vg.Devices, ", "), owner, storagev1alpha1.AllowDataLossAnnotation)
	return nil
}

// clusterTagPrefix starts the tag that names the LVMCluster a group was
// made for: only that cluster's opt-in can remove it.
const clusterTagPrefix = "strata.dev/lvmcluster="

func clusterTag(name string) string { return clusterTagPrefix + name }

// tagValue is the value of the first tag with prefix, or empty.
func tagValue(tags []string, prefix string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok {
			return v
		}
	}
	return ""
}

// namespaceTag marks the groups made for the LVMClusters of this agent's
// namespace: only those can be retained or removed here.
func (r *VolumeGroupReconciler) namespaceTag() string { return "strata.dev/namespace=" + r.Namespace }

// volumesOf names the LogicalVolumes on this node in a class's group.
func (r *VolumeGroupReconciler) volumesOf(ctx context.Context, class string) ([]string, error) {
	objs := &storagev1alpha1.LogicalVolumeList{}
	if err := r.List(ctx, objs); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range objs.Items {
		if o.Spec.NodeName == r.Node && o.Spec.DeviceClass == class {
			names = append(names, o.Name)
		}
	}
	return names, nil
}

// unclaimed lists the volumes in this node's classes' groups that no
// LogicalVolume bound to this node names. They are reported, never
// removed: a volume may hold data whatever the API says.
func (r *VolumeGroupReconciler) unclaimed(ctx context.Context, classes []storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	objs := &storagev1alpha1.LogicalVolumeList{}
	if err := r.List(ctx, objs); err != nil {
		return nil, err
	}
	claimed := map[string]bool{}
	for _, o := range objs.Items {
		if o.Spec.NodeName == r.Node {
			claimed[o.Spec.DeviceClass+"/"+o.Spec.Name] = true
		}
	}
	var out []string
	for _, c := range classes {
		if c.State != StateReady {
			continue
		}
		lvs, err := r.LVM.LogicalVolumes(ctx, c.VolumeGroup)
		if err != nil {
			return nil, err
		}
		for _, lv := range lvs {
			if lv.Kind != lvm.ThinPool && !claimed[c.VolumeGroup+"/"+lv.Name] {
				out = append(out, c.VolumeGroup+"/"+lv.Name)
			}
		}
	}
	return out, nil
}
