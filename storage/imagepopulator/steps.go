package imagepopulator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
)

// populate takes the claim through its steps: the prime claim on the
// chosen node, the pod that fills it, and the rebinding of its volume.
func (r *Reconciler) populate(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, img *storagev1alpha1.VolumeImage) (ctrl.Result, error) {
	if err := (provision.BucketImages{Endpoints: r.Endpoints}).CheckURL(img.Spec.URL); err != nil {
		// Nothing is made, and nothing is tried again until the claim
		// or the controller's list changes.
		r.event(pvc, corev1.EventTypeWarning, "PopulateRefused", "VolumeImage %s/%s: %v; the controller's list is --populator-endpoints (chart value populator.endpoints)",
			img.Namespace, img.Name, err)
		return ctrl.Result{}, nil
	}
	prime := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: primeName(pvc)}, prime)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.makePrime(ctx, pvc, sc)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if prime.Spec.VolumeName == "" {
		return ctrl.Result{}, nil // the prime claim is being provisioned; it wakes us when bound
	}
	if rebound, err := r.reboundTo(ctx, prime, pvc); err != nil || rebound {
		// Filled and handed over: what is left goes, and nothing starts again.
		return ctrl.Result{}, errors.Join(err, r.cleanUp(ctx, pvc.Namespace, pvc.Name))
	}
	pod := &corev1.Pod{}
	err = r.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: primeName(pvc)}, pod)
	if apierrors.IsNotFound(err) {
		// A failed fill's pod is gone; the next waits out its backoff,
		// however soon the pod's deletion woke this claim.
		if wait := time.Until(retryAt(prime)); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, r.startFill(ctx, pvc, prime, img)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return ctrl.Result{}, r.rebind(ctx, pvc, prime)
	case corev1.PodFailed:
		return r.failed(ctx, pvc, prime, pod, img)
	}
	return ctrl.Result{}, nil
}

// Annotations on the prime claim: how many fills failed, and when the
// next may start. They live on the API server, so a restart, or the
// failed pod's deletion waking the claim at once, keeps the backoff.
const (
	annotationFailures  = storagev1alpha1.PopulatorFailuresAnnotation
	annotationRetryAt   = storagev1alpha1.PopulatorRetryAtAnnotation
	annotationFailedPod = "populator.strata.dev/failed-pod"
)

// maxRetry bounds the backoff between fills.
const maxRetry = 30 * time.Minute

// backoff is the wait after the nth failed fill: Retry, doubling with
// each failure, at most maxRetry.
func (r *Reconciler) backoff(failures int) time.Duration {
	wait := r.Retry
	for i := 1; i < failures && wait < maxRetry; i++ {
		wait *= 2
	}
	return min(wait, maxRetry)
}

func retryAt(prime *corev1.PersistentVolumeClaim) time.Time {
	t, err := time.Parse(time.RFC3339Nano, prime.Annotations[annotationRetryAt])
	if err != nil {
		return time.Time{}
	}
	return t
}

// failed records a failed fill on the prime claim, with when the next
// may start, tells why on the claim, and removes the pod.
func (r *Reconciler) failed(ctx context.Context, pvc, prime *corev1.PersistentVolumeClaim, pod *corev1.Pod, img *storagev1alpha1.VolumeImage) (ctrl.Result, error) {
	if prime.Annotations[annotationFailedPod] == string(pod.UID) {
		// Counted already; a reconcile before its deletion showed.
		return ctrl.Result{RequeueAfter: time.Until(retryAt(prime))}, client.IgnoreNotFound(r.Delete(ctx, pod))
	}
	failures, _ := strconv.Atoi(prime.Annotations[annotationFailures])
	failures++
	wait := r.backoff(failures)
	// Optimistic: a prime read before another count was written fails
	// here and is read again, rather than counting one failure twice.
	patch := client.MergeFromWithOptions(prime.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if prime.Annotations == nil {
		prime.Annotations = map[string]string{}
	}
	prime.Annotations[annotationFailures] = strconv.Itoa(failures)
	prime.Annotations[annotationRetryAt] = time.Now().Add(wait).UTC().Format(time.RFC3339Nano)
	prime.Annotations[annotationFailedPod] = string(pod.UID)
	if err := r.Patch(ctx, prime, patch); err != nil {
		return ctrl.Result{}, err
	}
	msg := terminationMessage(pod)
	reason := failureReason(msg)
	r.event(pvc, corev1.EventTypeWarning, reason, "filling from VolumeImage %s failed (try %d), tried again in %s: %s",
		img.Name, failures, wait, msg)
	if reason == ReasonImageDigestMismatch {
		// Also on the VolumeImage, a kind Alerts may select: the image,
		// not the claim, is what is wrong.
		r.event(img, corev1.EventTypeWarning, reason, "claim %s/%s: %s", pvc.Namespace, pvc.Name, msg)
	}
	if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// makePrime makes the claim the image is written to, with the user
// claim's class, size, mode and node.
func (r *Reconciler) makePrime(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) error {
	node := pvc.Annotations[selectedNode]
	waits := sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if node == "" && waits {
		return nil // the scheduler has not chosen a node yet; it annotates the claim when it does
	}
	prime := &corev1.PersistentVolumeClaim{
		ObjectMeta: r.meta(pvc),
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: pvc.Spec.AccessModes, Resources: pvc.Spec.Resources,
			StorageClassName: &sc.Name, VolumeMode: pvc.Spec.VolumeMode},
	}
	if node != "" {
		prime.Annotations = map[string]string{selectedNode: node}
	}
	if err := r.Create(ctx, prime); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.event(pvc, corev1.EventTypeNormal, "Populating", "provisioning volume %s/%s to fill from VolumeImage %s%s",
		r.Namespace, prime.Name, pvc.Spec.DataSourceRef.Name, onNode(node))
	return nil
}

func onNode(node string) string {
	if node == "" {
		return ""
	}
	return " on node " + node
}

// reboundTo says whether the prime claim's volume is the claim's already.
func (r *Reconciler) reboundTo(ctx context.Context, prime, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: prime.Spec.VolumeName}, pv); err != nil {
		return false, err
	}
	return pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == pvc.UID, nil
}

// rebind gives the prime claim's filled volume to the user's claim, and
// removes the prime claim and its pod. The volume is bound to the claim
// by its claimRef: the prime claim is then lost, and goes without it.
func (r *Reconciler) rebind(ctx context.Context, pvc, prime *corev1.PersistentVolumeClaim) error {
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: prime.Spec.VolumeName}, pv); err != nil {
		return err
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		patch := client.MergeFrom(pv.DeepCopy())
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
		if err := r.Patch(ctx, pv, patch); err != nil {
			return err
		}
		r.event(pvc, corev1.EventTypeNormal, "Populated", "volume %s holds VolumeImage %s, checked; bound to this claim",
			pv.Name, pvc.Spec.DataSourceRef.Name)
	}
	return r.cleanUp(ctx, pvc.Namespace, pvc.Name)
}

// cleanUp removes what the populator made for a claim: its pod, prime
// claim and Secret.
func (r *Reconciler) cleanUp(ctx context.Context, ns, name string) error {
	sel := client.MatchingLabels{labelClaimNamespace: ns, labelClaimName: name}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &corev1.SecretList{}} {
		if err := r.List(ctx, list, client.InNamespace(r.Namespace), sel); err != nil {
			return err
		}
		err := apimeta.EachListItem(list, func(o runtime.Object) error {
			return client.IgnoreNotFound(r.Delete(ctx, o.(client.Object)))
		})
		if err != nil {
			return fmt.Errorf("cleaning up after claim %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

// terminationMessage is what the fill's container said as it ended.
// Reasons of the events on a claim whose fill failed: the image's bytes
// are not what its digest says, or anything else (docs/notifications.md).
const (
	ReasonImageDigestMismatch = "ImageDigestMismatch"
	ReasonPopulateFailed      = "PopulateFailed"
)

// failureReason tells a digest mismatch from the other failures, so an
// Alert can select it.
func failureReason(message string) string {
	if cache.MismatchIn(message) {
		return ReasonImageDigestMismatch
	}
	return ReasonPopulateFailed
}

func terminationMessage(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && t.Message != "" {
			return strings.TrimSpace(t.Message)
		}
	}
	return "the pod failed without a message; see its log"
}
