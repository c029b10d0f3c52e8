// Package resizer expands strata's volumes when their claims ask for
// more: the work of the community's external-resizer, done in strata's CSI
// controller process against the same Kubernetes API (docs/csi.md). A
// bound claim whose request is above its volume's capacity has the
// volume grown by the driver's ControllerExpandVolume; the volume's
// capacity is then raised, and the claim marked for the kubelet to grow
// the filesystem (NodeResizePending) or, for a volume that needs nothing
// on the node, given its new capacity at once.
package resizer

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// Reconciler grows the volumes of one CSI driver.
type Reconciler struct {
	client.Client
	// Secrets reads expand secrets from the API server, not a cache: a
	// cache would list and watch every Secret, which the driver's role
	// rightly may not, and wait for that forever.
	Secrets client.Reader
	Events  events.EventRecorder
	// Driver is the CSI driver whose volumes this resizer grows.
	Driver string
	// Expand is the driver's ControllerExpandVolume.
	Expand func(context.Context, *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error)
}

// SetupWithManager watches claims. The name's uniqueness check is off:
// a test process runs several CSI controllers, each with its own manager.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("resizer").For(&corev1.PersistentVolumeClaim{}).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).Complete(r)
}

// Reconcile grows one claim's volume if the claim asks for more.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return ctrl.Result{}, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.Driver {
		return ctrl.Result{}, nil
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.expand(ctx, pvc, pv, want)
}

// expand grows the volume to want and records the outcome on the claim,
// the volume, and in events.
func (r *Reconciler) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, want resource.Quantity) error {
	if err := r.setClaimStatus(ctx, pvc, want, corev1.PersistentVolumeClaimControllerResizeInProgress, corev1.PersistentVolumeClaimResizing, ""); err != nil {
		return err
	}
	req := expandRequest(pv, want)
	var err error
	var rsp *csi.ControllerExpandVolumeResponse
	if req.Secrets, err = r.secrets(ctx, pv); err == nil {
		rsp, err = r.Expand(ctx, req)
	}
	if err != nil {
		// A failure that may pass keeps the resize in progress, to be tried
		// again; one the driver refuses outright is infeasible.
		state := corev1.PersistentVolumeClaimControllerResizeInProgress
		if code := status.Code(err); code == codes.InvalidArgument || code == codes.OutOfRange {
			state = corev1.PersistentVolumeClaimControllerResizeInfeasible
		}
		r.event(pvc, corev1.EventTypeWarning, "VolumeResizeFailed", "growing volume %s to %s: %v", pv.Name, want.String(), err)
		_ = r.setClaimStatus(ctx, pvc, want, state, corev1.PersistentVolumeClaimControllerResizeError, err.Error())
		return fmt.Errorf("growing volume %s of claim %s/%s to %s: %w", pv.Name, pvc.Namespace, pvc.Name, want.String(), err)
	}
	size := *resource.NewQuantity(rsp.GetCapacityBytes(), resource.BinarySI)
	if size.Cmp(want) < 0 {
		size = want
	}
	before := pv.DeepCopy()
	pv.Spec.Capacity[corev1.ResourceStorage] = size
	if err := r.Patch(ctx, pv, client.MergeFrom(before)); err != nil {
		return err
	}
	if rsp.GetNodeExpansionRequired() {
		r.event(pvc, corev1.EventTypeNormal, "FileSystemResizeRequired", "volume %s grew to %s; the kubelet grows its filesystem where it is mounted", pv.Name, size.String())
		return r.setClaimStatus(ctx, pvc, want, corev1.PersistentVolumeClaimNodeResizePending, corev1.PersistentVolumeClaimFileSystemResizePending, "")
	}
	r.event(pvc, corev1.EventTypeNormal, "VolumeResizeSuccessful", "volume %s grew to %s", pv.Name, size.String())
	return r.finish(ctx, pvc, size)
}

// expandRequest is the ControllerExpandVolume call for a claim's volume.
func expandRequest(pv *corev1.PersistentVolume, want resource.Quantity) *csi.ControllerExpandVolumeRequest {
	capability := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: accessMode(pv.Spec.AccessModes)}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		capability.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType}}
	}
	return &csi.ControllerExpandVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()},
		VolumeCapability: capability,
	}
}

// accessMode is the CSI access mode of the volume's first access mode.
func accessMode(modes []corev1.PersistentVolumeAccessMode) csi.VolumeCapability_AccessMode_Mode {
	for _, m := range modes {
		switch m {
		case corev1.ReadWriteOnce, corev1.ReadWriteOncePod:
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		case corev1.ReadOnlyMany:
			return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case corev1.ReadWriteMany:
			return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		}
	}
	return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
}

// secrets are the volume's expand secrets: the Secret its StorageClass
// named (csi.storage.k8s.io/controller-expand-secret-*), which the
// provisioner wrote on the volume.
func (r *Reconciler) secrets(ctx context.Context, pv *corev1.PersistentVolume) (map[string]string, error) {
	ref := pv.Spec.CSI.ControllerExpandSecretRef
	if ref == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("the expand secret %s/%s of volume %s: %w", ref.Namespace, ref.Name, pv.Name, err)
	}
	out := map[string]string{}
	for k, v := range secret.Data {
		out[k] = string(v)
	}
	return out, nil
}

// setClaimStatus records a resize in progress, pending on the node or
// failed, as external-resizer does: the size allocated, its state, and a
// condition.
func (r *Reconciler) setClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, want resource.Quantity,
	state corev1.ClaimResourceStatus, condition corev1.PersistentVolumeClaimConditionType, message string) error {
	before := pvc.DeepCopy()
	if pvc.Status.AllocatedResources == nil {
		pvc.Status.AllocatedResources = corev1.ResourceList{}
	}
	pvc.Status.AllocatedResources[corev1.ResourceStorage] = want
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = state
	pvc.Status.Conditions = withCondition(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: condition, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: message,
	})
	return r.Status().Patch(ctx, pvc, client.MergeFrom(before))
}

// finish gives the claim its new capacity and clears the resize state.
func (r *Reconciler) finish(ctx context.Context, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	before := pvc.DeepCopy()
	if pvc.Status.Capacity == nil {
		pvc.Status.Capacity = corev1.ResourceList{}
	}
	pvc.Status.Capacity[corev1.ResourceStorage] = size
	delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	pvc.Status.Conditions = withCondition(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{})
	err := r.Status().Patch(ctx, pvc, client.MergeFrom(before))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// withCondition keeps only the resize condition given (none when its
// type is empty): a claim is in one resize state at a time.
func withCondition(conds []corev1.PersistentVolumeClaimCondition, c corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, have := range conds {
		switch have.Type {
		case corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimFileSystemResizePending,
			corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimNodeResizeError:
			continue
		}
		out = append(out, have)
	}
	if c.Type != "" {
		out = append(out, c)
	}
	return out
}

func (r *Reconciler) event(obj client.Object, kind, reason, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(obj, nil, kind, reason, "Resize", format, args...)
	}
}
