// Package apply is how strata applies a Kustomization's objects, shared
// by the Kustomization reconciler and strata plan: Flux's server-side
// apply options and per-object annotations, the objects' preparation,
// the inventory, and what deletion of a Kustomization deletes.
package apply

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager owns the fields strata applies.
const FieldManager = "strata"

// Per-object annotations, with Flux's names and values.
var (
	group        = kustomizev1.GroupVersion.Group
	reconcileKey = group + "/reconcile"
	ssaKey       = group + "/ssa"
	forceKey     = group + "/force"
	// PruneKey is the annotation that keeps an object from being pruned.
	PruneKey          = group + "/prune"
	lastAppliedConfig = "kubectl.kubernetes.io/last-applied-configuration"
)

// Options are Flux's apply options for obj: its force setting, the
// per-object annotations, and the metadata a takeover from kubectl or
// Flux's kustomize-controller leaves behind.
func Options(obj *kustomizev1.Kustomization) ssa.ApplyOptions {
	diff := DiffOptions(obj)
	return ssa.ApplyOptions{
		Force:                diff.Force,
		ForceSelector:        diff.ForceSelector,
		ExclusionSelector:    diff.Exclusions,
		IfNotPresentSelector: diff.IfNotPresentSelector,
		DriftIgnoreRules:     diff.DriftIgnoreRules,
		WaitInterval:         500 * time.Millisecond,
		WaitTimeout:          obj.GetTimeout(),
		Cleanup: ssa.ApplyCleanupOptions{
			Annotations: []string{lastAppliedConfig},
			FieldManagers: []ssa.FieldManager{
				{Name: "kubectl", OperationType: "Apply"},
				{Name: "kubectl", OperationType: "Update"},
				{Name: "before-first-apply", OperationType: "Update"},
				// Objects taken over from Flux's kustomize-controller.
				{Name: "kustomize-controller", OperationType: "Apply"},
			},
			Exclusions: map[string]string{ssaKey: kustomizev1.MergeValue},
		},
	}
}

// PrepareObjects turns rendered objects into what the engine applies:
// owned by the Kustomization (Flux's name and namespace labels), with its
// commonMetadata, keeping the fields the volume binder set and a
// failed-over app on its backup claim. strata plan --kubeconfig dry-runs
// the same objects.
//
// live reads the objects about to be applied, as whoever applies them.
// failovers reads strata's Failovers as strata itself: keeping an app on
// its backup is strata's work, so a tenant that may apply a Deployment
// needs no rights on Failovers.
func PrepareObjects(ctx context.Context, m *ssa.ResourceManager, live, failovers client.Reader, obj *kustomizev1.Kustomization,
	objects []*unstructured.Unstructured) error {
	m.SetOwnerLabels(objects, obj.Name, obj.Namespace)
	if cm := obj.Spec.CommonMetadata; cm != nil {
		ssautils.SetCommonMetadata(objects, cm.Labels, cm.Annotations)
	}
	if err := keepBinderFields(ctx, live, objects); err != nil {
		return err
	}
	return keepFailoverSwitch(ctx, failovers, objects)
}

// NewResourceManager manages objects as the engine's field manager.
func NewResourceManager(c client.Client, poller *polling.StatusPoller) *ssa.ResourceManager {
	return ssa.NewResourceManager(c, poller, ssa.Owner{Field: FieldManager, Group: kustomizev1.GroupVersion.Group})
}

// DiffOptions are the per-object annotations the engine honours when it
// applies, as Flux's kustomize-controller does, and the fields spec.ignore
// leaves to others.
func DiffOptions(obj *kustomizev1.Kustomization) ssa.DiffOptions {
	return ssa.DiffOptions{
		Force:                obj.Spec.Force,
		ForceSelector:        map[string]string{forceKey: kustomizev1.EnabledValue},
		Exclusions:           map[string]string{reconcileKey: kustomizev1.DisabledValue, ssaKey: kustomizev1.IgnoreValue},
		IfNotPresentSelector: map[string]string{ssaKey: kustomizev1.IfNotPresentValue},
		DriftIgnoreRules:     ignoreRules(obj.Spec.Ignore),
	}
}

// ignoreRules are spec.ignore's rules as ssa takes them: the JSON pointers
// it neither compares nor applies on existing objects that match the
// target (every object without one), so that another controller, such as
// a HorizontalPodAutoscaler setting /spec/replicas, keeps its values.
func ignoreRules(rules []kustomizev1.IgnoreRule) []jsondiff.IgnoreRule {
	var out []jsondiff.IgnoreRule
	for _, r := range rules {
		rule := jsondiff.IgnoreRule{Paths: r.Paths}
		if t := r.Target; t != nil {
			rule.Selector = &jsondiff.Selector{Group: t.Group, Version: t.Version, Kind: t.Kind, Name: t.Name,
				Namespace: t.Namespace, AnnotationSelector: t.AnnotationSelector, LabelSelector: t.LabelSelector}
		}
		out = append(out, rule)
	}
	return out
}

// PruneDisabled says the object opted out of pruning with Flux's
// kustomize.toolkit.fluxcd.io/prune: disabled annotation.
func PruneDisabled(o metav1.Object) bool {
	return o.GetAnnotations()[PruneKey] == kustomizev1.DisabledValue
}

// keepBinderFields copies into the desired objects the fields that the
// PersistentVolume binder sets, when Git leaves them out: a static PV's
// claimRef.uid (claimRef is atomic, so applying it without the uid would
// unbind the volume, Flux #2250) and a PVC's volumeName (removing it fails
// the dry-run as an immutable change, Flux #2386).
func keepBinderFields(ctx context.Context, c client.Reader, objects []*unstructured.Unstructured) error {
	for _, o := range objects {
		if o.GetAPIVersion() != "v1" {
			continue
		}
		switch o.GetKind() {
		case "PersistentVolume":
			if err := keepField(ctx, c, o, "spec", "claimRef", "uid"); err != nil {
				return err
			}
		case "PersistentVolumeClaim":
			if err := keepField(ctx, c, o, "spec", "volumeName"); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepField sets path on desired to the live value when desired lacks it.
// For a claimRef, the live reference must point at the same claim.
func keepField(ctx context.Context, c client.Reader, desired *unstructured.Unstructured, path ...string) error {
	if _, found, _ := unstructured.NestedFieldNoCopy(desired.Object, path...); found {
		return nil
	}
	parent := path[:len(path)-1]
	if len(parent) > 1 {
		if _, found, _ := unstructured.NestedFieldNoCopy(desired.Object, parent...); !found {
			return nil
		}
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading live %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	if len(parent) > 1 && !sameClaim(desired, live) {
		return nil
	}
	value, found, _ := unstructured.NestedFieldCopy(live.Object, path...)
	if !found {
		return nil
	}
	return unstructured.SetNestedField(desired.Object, value, path...)
}

func sameClaim(desired, live *unstructured.Unstructured) bool {
	for _, f := range []string{"namespace", "name"} {
		d, _, _ := unstructured.NestedString(desired.Object, "spec", "claimRef", f)
		l, _, _ := unstructured.NestedString(live.Object, "spec", "claimRef", f)
		if d != l {
			return false
		}
	}
	return true
}
