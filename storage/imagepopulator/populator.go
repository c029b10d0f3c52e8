// Package imagepopulator fills claims from VM images declared in Git, as
// Kubernetes' volume populators do: a claim whose spec.dataSourceRef
// names a VolumeImage is provisioned as a "prime" claim in the
// populator's namespace, on the node the scheduler chose for the claim;
// a pod there runs `strata image fill` onto it (a raw block device, or
// disk.raw in a filesystem volume), through the node's image cache; and
// the filled volume is then bound to the user's claim (docs/images.md).
// A claim is filled once: a later change of its VolumeImage fills later
// claims only.
package imagepopulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// Reconciler populates claims of strata's classes from VolumeImages.
type Reconciler struct {
	client.Client
	// Namespace holds the prime claims, their pods and copies of the
	// bucket credentials.
	Namespace string
	// Image is strata's image, which the pods run.
	Image string
	// CacheDir is the nodes' image cache, a host path.
	CacheDir string
	// Endpoints are the S3 endpoints (scheme://host[:port]) VolumeImages
	// may name, as the agents' image jobs list theirs; a VolumeImage
	// naming another is refused before a volume is made or a pod runs,
	// and the pod is given the same list. Empty refuses every one.
	Endpoints []string
	Events    events.EventRecorder
	// Retry is how long after a failed fill the next try starts; it
	// doubles with each failure, up to 30 minutes.
	Retry time.Duration
}

// Labels on the populator's objects: the claim they fill.
const (
	labelClaimNamespace = storagev1alpha1.PopulatorClaimNamespaceLabel
	labelClaimName      = storagev1alpha1.PopulatorClaimNameLabel
)

// selectedNode is the annotation the scheduler puts on a claim of a
// WaitForFirstConsumer class: the node its first pod goes to.
const selectedNode = storagev1alpha1.SelectedNodeAnnotation

// SetupWithManager watches claims, and the prime claims and pods, which
// wake the claim they fill.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toClaim := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ns, name := o.GetLabels()[labelClaimNamespace], o.GetLabels()[labelClaimName]
		if ns == "" || name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("imagepopulator").
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&corev1.Pod{}, toClaim).
		Watches(&corev1.PersistentVolumeClaim{}, toClaim).
		Complete(r)
}

// Reconcile moves one claim's population on a step.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, req.NamespacedName, pvc)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.cleanUp(ctx, req.Namespace, req.Name)
	}
	if err != nil || !wantsImage(pvc) {
		return ctrl.Result{}, err
	}
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
		// Bound, or going: nothing starts for it, and what was made goes.
		return ctrl.Result{}, r.cleanUp(ctx, pvc.Namespace, pvc.Name)
	}
	sc, err := r.ourClass(ctx, pvc)
	if err != nil || sc == nil {
		return ctrl.Result{}, err
	}
	img := &storagev1alpha1.VolumeImage{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: pvc.Namespace, Name: pvc.Spec.DataSourceRef.Name}, img); err != nil {
		r.event(pvc, corev1.EventTypeWarning, "PopulateWaiting", "VolumeImage %s/%s: %v", pvc.Namespace, pvc.Spec.DataSourceRef.Name, err)
		return ctrl.Result{RequeueAfter: r.Retry}, client.IgnoreNotFound(err)
	}
	return r.populate(ctx, pvc, sc, img)
}

// wantsImage says whether a claim asks to be filled from a VolumeImage.
func wantsImage(pvc *corev1.PersistentVolumeClaim) bool {
	ref := pvc.Spec.DataSourceRef
	return ref != nil && ref.APIGroup != nil && *ref.APIGroup == storagev1alpha1.GroupVersion.Group &&
		ref.Kind == storagev1alpha1.VolumeImageKind && (ref.Namespace == nil || *ref.Namespace == pvc.Namespace)
}

// ourClass is the claim's class when strata provisions it, nil
// otherwise.
func (r *Reconciler) ourClass(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, sc); err != nil || sc.Provisioner != storagev1alpha1.CSIDriver {
		return nil, client.IgnoreNotFound(err)
	}
	return sc, nil
}

func (r *Reconciler) event(obj client.Object, kind, reason, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(obj, nil, kind, reason, reason, format, args...)
	}
}

// primeName names the prime claim, its pod and its Secret: one per claim.
func primeName(pvc *corev1.PersistentVolumeClaim) string { return fmt.Sprintf("populate-%s", pvc.UID) }
