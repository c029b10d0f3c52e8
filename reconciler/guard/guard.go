// Package guard decides whether deleting an object can lose data, and
// blocks such deletions unless the live object or its Kustomization opts
// in with strata.dev/allow-data-loss: "true". Prune, deletionPolicy and
// force-recreate all delete through it.
package guard

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildbarnv1alpha1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// OptInAnnotation allows deleting an object that holds data.
const OptInAnnotation = storagev1alpha1.AllowDataLossAnnotation

// StrataStorageGroup is the API group of strata's storage kinds, all of
// which hold or describe data.
const StrataStorageGroup = "storage.strata.dev"

// dataKinds hold or reference data by their nature.
var dataKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "PersistentVolume"}:                             true,
	{Group: "", Kind: "PersistentVolumeClaim"}:                        true,
	{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshot"}:        true,
	{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshotContent"}: true,
}

// buildbarnStorage's shards keep Buildbarn's cache in their claims; its
// controller deletes them with it only under the opt-in
// (docs/buildbarn.md).
var buildbarnStorage = schema.GroupKind{Group: buildbarnv1alpha1.GroupVersion.Group, Kind: "BuildbarnStorage"}

// OptedIn reports whether any of the metadata carries the opt-in.
func OptedIn(objs ...client.Object) bool {
	for _, o := range objs {
		if o != nil && o.GetAnnotations()[OptInAnnotation] == "true" {
			return true
		}
	}
	return false
}

// Reason returns why deleting the live object would lose data, or "" when
// it would not: it holds data, or its deletion cascades to what does. It
// reads the cluster for Namespaces (what would go with them?), CRDs (do
// they still have objects?) and any other namespaced object (does it own
// a PersistentVolumeClaim, which the garbage collector would delete?).
func Reason(ctx context.Context, c client.Reader, obj client.Object) (string, error) {
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	switch {
	case dataKinds[gk] || gk.Group == StrataStorageGroup:
		return fmt.Sprintf("%s holds data", gk.Kind), nil
	case gk == buildbarnStorage:
		return "BuildbarnStorage's shards hold the build cache (CAS, AC and FSAC claims), which go with it under the opt-in", nil
	case gk == schema.GroupKind{Kind: "Namespace"}:
		return namespaceReason(ctx, c, obj.GetName())
	case gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return crdReason(ctx, c, obj.GetName())
	case gk == schema.GroupKind{Group: "apps", Kind: "StatefulSet"} && deletesItsClaims(obj):
		return "StatefulSet deletes its PersistentVolumeClaims with it (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete)", nil
	}
	if obj.GetNamespace() == "" {
		return "", nil
	}
	return ownerReason(ctx, c, obj)
}

// namespaced are the kinds whose objects a Namespace's deletion takes
// with it and that hold or describe data. A kind the cluster does not
// serve is skipped.
var namespaced = []schema.GroupVersionKind{
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshot"},
	{Group: StrataStorageGroup, Version: storagev1alpha1.GroupVersion.Version, Kind: "LVMCluster"},
	{Group: StrataStorageGroup, Version: storagev1alpha1.GroupVersion.Version, Kind: "LVMVolumeGroupNodeStatus"},
	buildbarnStorage.WithVersion(buildbarnv1alpha1.GroupVersion.Version),
}

func namespaceReason(ctx context.Context, c client.Reader, ns string) (string, error) {
	for _, gvk := range namespaced {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.List(ctx, list, client.InNamespace(ns), client.Limit(1))
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue // the cluster has no such kind, so none is in the namespace
		}
		if err != nil {
			return "", fmt.Errorf("listing %ss in namespace %s: %w", gvk.Kind, ns, err)
		}
		if len(list.Items) > 0 {
			return fmt.Sprintf("Namespace still contains %ss (e.g. %s), which its deletion would delete", gvk.Kind, list.Items[0].GetName()), nil
		}
	}
	return "", nil
}

// deletesItsClaims says whether a StatefulSet's claims go with it.
func deletesItsClaims(obj client.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	return policy == "Delete"
}

// ownerReason names a PersistentVolumeClaim that obj owns: deleting obj
// would have the garbage collector delete the claim.
func ownerReason(ctx context.Context, c client.Reader, obj client.Object) (string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaimList"})
	if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return "", fmt.Errorf("listing PersistentVolumeClaims in namespace %s, to see whether %s owns one: %w", obj.GetNamespace(), ObjectID(obj), err)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	for _, claim := range list.Items {
		for _, ref := range claim.GetOwnerReferences() {
			if ref.Kind == kind && ref.Name == obj.GetName() && (ref.UID == "" || obj.GetUID() == "" || ref.UID == obj.GetUID()) {
				return fmt.Sprintf("it owns PersistentVolumeClaim %s, which the garbage collector would delete with it", claim.GetName()), nil
			}
		}
	}
	return "", nil
}

func crdReason(ctx context.Context, c client.Reader, name string) (string, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
	if err := c.List(ctx, list, client.Limit(1)); err != nil {
		return "", fmt.Errorf("listing objects of CustomResourceDefinition %s: %w", name, err)
	}
	if len(list.Items) > 0 {
		o := list.Items[0]
		return fmt.Sprintf("CustomResourceDefinition still has objects (e.g. %s %s)", crd.Spec.Names.Kind, objectName(&o)), nil
	}
	return "", nil
}

// Blocked is a deletion the guard refused.
type Blocked struct {
	// Object is "Kind/namespace/name".
	Object string
	Reason string
	// Cause is why the deletion was attempted, e.g. an immutable field
	// change under force.
	Cause string
}

func (b *Blocked) Error() string {
	msg := fmt.Sprintf("deletion of %s blocked: %s", b.Object, b.Reason)
	if b.Cause != "" {
		msg += "; it would be deleted because " + b.Cause
	}
	return msg + fmt.Sprintf("; to allow it, annotate the object or its Kustomization with %s: \"true\"", OptInAnnotation)
}

// Check returns a Blocked error when deleting live would lose data and
// neither it nor owner carries the opt-in.
func Check(ctx context.Context, c client.Reader, live client.Object, owner client.Object) error {
	if OptedIn(live, owner) {
		return nil
	}
	reason, err := Reason(ctx, c, live)
	if err != nil || reason == "" {
		return err
	}
	return &Blocked{Object: ObjectID(live), Reason: reason}
}

// ObjectID formats an object as Kind/namespace/name (Kind/name when
// cluster-scoped), as Flux's messages do.
func ObjectID(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + objectName(o)
}

func objectName(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
