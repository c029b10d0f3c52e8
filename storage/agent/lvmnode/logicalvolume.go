package lvmnode

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/finalizer"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Reasons of a LogicalVolume's Ready condition.
const (
	CreatedReason      = "Created"
	NotOwnedReason     = "NotOwned"
	NoSpaceReason      = "NoSpace"
	ClassUnknownReason = "DeviceClassUnknown"
	VolumeFailedReason = "VolumeFailed"
)

// LogicalVolumeReconciler makes the LogicalVolumes bound to its node
// real. Every step looks at the volume manager first, so that a reconcile
// repeated after a crash at any line finds what the last one did and
// neither loses nor duplicates a volume.
type LogicalVolumeReconciler struct {
	client.Client
	Node    string
	LVM     lvm.Manager
	Classes ClassResolver
	Events  events.EventRecorder
}

// ClassResolver says where a device class's volumes live on this node.
type ClassResolver interface {
	Resolve(ctx context.Context, class string) (Placement, error)
}

// Placement is a device class's volume group and, when thin, its pool.
type Placement struct {
	VolumeGroup, ThinPool string
}

// SetupWithManager watches only the LogicalVolumes of this node.
func (r *LogicalVolumeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&storagev1alpha1.LogicalVolume{}, builder.WithPredicates(onNode(r.Node), predicate.GenerationChangedPredicate{})).
		// Volumes are independent; the volume manager orders what must be.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Named("logicalvolume-" + r.Node).
		Complete(r)
}

// onNode passes the LogicalVolumes bound to node.
func onNode(node string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		lv, ok := o.(*storagev1alpha1.LogicalVolume)
		return ok && lv.Spec.NodeName == node
	})
}

// Reconcile creates, grows or removes one volume.
func (r *LogicalVolumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &storagev1alpha1.LogicalVolume{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if obj.Spec.NodeName != r.Node {
		return ctrl.Result{}, nil
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.remove(ctx, obj)
	}
	if err := finalizer.Ensure(ctx, r, obj, storagev1alpha1.LogicalVolumeFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	before := obj.DeepCopy()
	err := r.ensure(ctx, obj)
	obj.Status.ObservedGeneration = obj.Generation
	if perr := status.Patch(ctx, r.Client, before, obj); perr != nil {
		return ctrl.Result{}, perr
	}
	return ctrl.Result{}, err
}

// ensure brings the volume to the spec and records the outcome.
func (r *LogicalVolumeReconciler) ensure(ctx context.Context, obj *storagev1alpha1.LogicalVolume) error {
	where, err := r.Classes.Resolve(ctx, obj.Spec.DeviceClass)
	if err != nil {
		status.MarkFailed(obj, ClassUnknownReason, err.Error(), false)
		return err
	}
	size := uint64(obj.Spec.Size.Value())
	current, err := lvm.FindVolume(ctx, r.LVM, where.VolumeGroup, obj.Spec.Name)
	if errors.Is(err, lvm.ErrNotFound) {
		if err = r.create(ctx, obj, where, size); err == nil {
			current, err = lvm.FindVolume(ctx, r.LVM, where.VolumeGroup, obj.Spec.Name)
		}
	}
	if err == nil {
		err = checkOwned(current, obj, where)
	}
	// A snapshot starts at its source's size, which may be less than asked.
	if err == nil && current.Size < size {
		if err = r.LVM.ResizeVolume(ctx, where.VolumeGroup, obj.Spec.Name, size); err == nil {
			r.event(obj, corev1.EventTypeNormal, "Resized", "grew %s/%s to %d bytes", where.VolumeGroup, obj.Spec.Name, size)
		}
	}
	if err != nil {
		reason := VolumeFailedReason
		if errors.Is(err, lvm.ErrNoSpace) {
			reason = NoSpaceReason
		}
		if errors.Is(err, errNotOwned) {
			reason = NotOwnedReason
		}
		status.MarkFailed(obj, reason, err.Error(), false)
		r.event(obj, corev1.EventTypeWarning, reason, "%v", err)
		return err
	}
	return r.record(ctx, obj, where)
}

func (r *LogicalVolumeReconciler) create(ctx context.Context, obj *storagev1alpha1.LogicalVolume, where Placement, size uint64) error {
	tags := []string{storagev1alpha1.LogicalVolumeTag(obj.Name)}
	var err error
	if obj.Spec.Source != "" {
		source := &storagev1alpha1.LogicalVolume{}
		if err := r.Get(ctx, client.ObjectKey{Name: obj.Spec.Source}, source); err != nil {
			return fmt.Errorf("snapshot source LogicalVolume %s: %w", obj.Spec.Source, err)
		}
		err = r.LVM.CreateSnapshot(ctx, where.VolumeGroup, obj.Spec.Name, source.Spec.Name, tags)
	} else {
		err = r.LVM.CreateVolume(ctx, where.VolumeGroup, lvm.VolumeSpec{Name: obj.Spec.Name, Size: size, Pool: where.ThinPool, Tags: tags})
	}
	if errors.Is(err, lvm.ErrExists) {
		return nil // made by a reconcile that did not get to record it
	}
	if err == nil {
		r.event(obj, corev1.EventTypeNormal, CreatedReason, "created %s/%s", where.VolumeGroup, obj.Spec.Name)
	}
	return err
}

// errNotOwned marks a volume of the right name that is not this object's.
var errNotOwned = errors.New("not this LogicalVolume's")

// checkOwned refuses a volume that does not carry the object's tag: one
// made by hand, by another tool, or for another LogicalVolume whose name
// collides. strata never adopts, grows or removes such a volume.
func checkOwned(lv lvm.LogicalVolume, obj *storagev1alpha1.LogicalVolume, where Placement) error {
	want := storagev1alpha1.LogicalVolumeTag(obj.Name)
	if slices.Contains(lv.Tags, want) {
		return nil
	}
	return fmt.Errorf("logical volume %s/%s exists but is %w (it lacks the tag %s; its tags: %v): strata never adopts, resizes or removes it; "+
		"give this LogicalVolume another spec.name, or remove or retag that volume by hand if it is garbage",
		where.VolumeGroup, obj.Spec.Name, errNotOwned, want, lv.Tags)
}

// record writes the device and size the volume has now.
func (r *LogicalVolumeReconciler) record(ctx context.Context, obj *storagev1alpha1.LogicalVolume, where Placement) error {
	lv, err := lvm.FindVolume(ctx, r.LVM, where.VolumeGroup, obj.Spec.Name)
	if err != nil {
		return err
	}
	dev, err := r.LVM.DevicePath(ctx, where.VolumeGroup, obj.Spec.Name)
	if err != nil {
		return err
	}
	obj.Status.Device = dev
	obj.Status.CurrentSize = resource.NewQuantity(int64(lv.Size), resource.BinarySI)
	status.MarkReady(obj, meta.SucceededReason, fmt.Sprintf("%s/%s is %s", where.VolumeGroup, obj.Spec.Name, dev))
	return nil
}

// remove deletes the volume, then lets the object go.
func (r *LogicalVolumeReconciler) remove(ctx context.Context, obj *storagev1alpha1.LogicalVolume) error {
	if !controllerutil.ContainsFinalizer(obj, storagev1alpha1.LogicalVolumeFinalizer) {
		return nil
	}
	where, err := r.Classes.Resolve(ctx, obj.Spec.DeviceClass)
	if err != nil {
		return err
	}
	current, err := lvm.FindVolume(ctx, r.LVM, where.VolumeGroup, obj.Spec.Name)
	if errors.Is(err, lvm.ErrNotFound) {
		return finalizer.Release(ctx, r, obj, storagev1alpha1.LogicalVolumeFinalizer)
	}
	if err != nil {
		return err
	}
	if err := checkOwned(current, obj, where); err != nil {
		// The object goes; the volume, which was never its, stays.
		r.event(obj, corev1.EventTypeWarning, NotOwnedReason, "not removing %s/%s: %v", where.VolumeGroup, obj.Spec.Name, err)
		return finalizer.Release(ctx, r, obj, storagev1alpha1.LogicalVolumeFinalizer)
	}
	if err := r.LVM.RemoveVolume(ctx, where.VolumeGroup, obj.Spec.Name); err != nil && !errors.Is(err, lvm.ErrNotFound) {
		r.event(obj, corev1.EventTypeWarning, VolumeFailedReason, "removing %s/%s: %v", where.VolumeGroup, obj.Spec.Name, err)
		return err
	}
	return finalizer.Release(ctx, r, obj, storagev1alpha1.LogicalVolumeFinalizer)
}

func (r *LogicalVolumeReconciler) event(obj *storagev1alpha1.LogicalVolume, kind, reason, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(obj, nil, kind, reason, reason, format, args...)
	}
}
