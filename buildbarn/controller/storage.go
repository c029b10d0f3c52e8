package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/rules"
)

// StorageFinalizer lets the controller decide what happens to a deleted
// storage's claims: they stay unless the object opted in to data loss.
const StorageFinalizer = "buildbarn.strata.dev/storage"

func optedIn(obj client.Object) bool {
	return obj.GetAnnotations()[storagev1alpha1.AllowDataLossAnnotation] == "true"
}

// shardClaims are a shard's three claims, sized from their stores, with
// the spec's templates' class, access modes and labels over the defaults.
func shardClaims(s *scope) ([]objects.Claim, error) {
	spec := s.obj.(*bbv1.BuildbarnStorage).Spec.StorageExtras
	sizes := rules.BuildbarnStoreSizes(&spec)
	class := spec.StorageClassName
	if class == "" {
		class = rules.BuildbarnStorageClass
	}
	stores := []struct {
		name, path string
		size       config.StoreSize
	}{{"cas", config.CASPath, sizes.CAS}, {"ac", config.ACPath, sizes.AC}, {"fsac", config.FSACPath, sizes.FSAC}}
	var claims []objects.Claim
	for _, st := range stores {
		t := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Labels: s.owner.Selector()},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &class,
			}}
		if o := templateNamed(spec.VolumeClaimTemplates, st.name); o != nil {
			override(&t, o)
		}
		t.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(st.size.ClaimBytes(), resource.BinarySI)}
		claims = append(claims, objects.Claim{Name: st.name, MountPath: st.path, Template: t})
	}
	for _, t := range spec.VolumeClaimTemplates {
		if !slices.Contains([]string{"cas", "ac", "fsac"}, t.Name) {
			return nil, refuse("ClaimTemplateUnknown", "spec.volumeClaimTemplates names %q: only cas, ac and fsac can be overridden", t.Name)
		}
	}
	return claims, nil
}

func templateNamed(ts []corev1.PersistentVolumeClaim, name string) *corev1.PersistentVolumeClaim {
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	return nil
}

func override(t, o *corev1.PersistentVolumeClaim) {
	for k, v := range o.Labels {
		t.Labels[k] = v
	}
	if len(o.Spec.AccessModes) > 0 {
		t.Spec.AccessModes = o.Spec.AccessModes
	}
	if o.Spec.StorageClassName != nil {
		t.Spec.StorageClassName = o.Spec.StorageClassName
	}
	t.Spec.VolumeMode = o.Spec.VolumeMode
}

// statefulSetManager runs the shards. A StatefulSet's claim templates
// cannot change, so for a grown store the set is deleted with its pods
// orphaned and made again with the new templates, adopting the running
// pods, and every existing claim grows through CSI expansion. A shrunk
// store, or a changed class, needs new claims: without the data-loss
// opt-in it is refused and the old claims are kept.
type statefulSetManager struct{}

func (statefulSetManager) name() string { return "StatefulSet" }

func (statefulSetManager) ensure(ctx context.Context, r *Reconciler, s *scope) error {
	claims, err := shardClaims(s)
	if err != nil {
		return err
	}
	want := objects.StatefulSet(s.owner, s.replicas(), pod(s, args(config.StorageFile), storagePorts), claims, optedIn(s.obj))
	live := &appsv1.StatefulSet{}
	err = r.Get(ctx, client.ObjectKeyFromObject(want), live)
	if err = client.IgnoreNotFound(err); err != nil {
		return err
	}
	if live.UID != "" {
		if !live.DeletionTimestamp.IsZero() {
			s.workload, s.requeue = statefulSetState(live), time.Second
			s.workload.replacing = true
			return nil // the old set is going; the next pass makes the new one
		}
		if done, err := r.changeClaims(ctx, s, live, want); done || err != nil {
			return err
		}
	}
	if err := r.apply(ctx, s, want); err != nil {
		return err
	}
	s.workload = statefulSetState(want)
	return r.growClaims(ctx, s, want.Spec.VolumeClaimTemplates)
}

// deleteReplacedClaims deletes the shards' claims of the templates that
// need new claims; the caller has the opt-in.
func (r *Reconciler) deleteReplacedClaims(ctx context.Context, s *scope, replaced []string) error {
	claims, err := r.claimsOf(ctx, s)
	if err != nil {
		return err
	}
	for _, c := range claims {
		if !slices.Contains(replaced, claimTemplate(c.Name, s.owner.Name)) {
			continue
		}
		if err := r.Delete(ctx, &c); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.warn(s, "ClaimDeleted", "deleted claim %s to make it again with the new template (opted in with %s)", c.Name, storagev1alpha1.AllowDataLossAnnotation)
	}
	return nil
}

// growClaims brings every bound shard claim up to its template's size,
// on every pass: a claim still waiting for its volume cannot be resized,
// and grows once it is bound (the claims are watched).
func (r *Reconciler) growClaims(ctx context.Context, s *scope, templates []corev1.PersistentVolumeClaim) error {
	claims, err := r.claimsOf(ctx, s)
	if err != nil {
		return err
	}
	for _, c := range claims {
		if c.Status.Phase == corev1.ClaimBound && c.DeletionTimestamp.IsZero() {
			if err := r.grow(ctx, s, &c, templates); err != nil {
				return err
			}
		}
	}
	return nil
}

// changeClaims handles a change of the claim templates. done says the
// set was deleted, to be made again on the next pass.
func (r *Reconciler) changeClaims(ctx context.Context, s *scope, live, want *appsv1.StatefulSet) (bool, error) {
	grown, replaced := compareTemplates(live.Spec.VolumeClaimTemplates, want.Spec.VolumeClaimTemplates)
	if len(grown) == 0 && len(replaced) == 0 {
		return false, nil
	}
	if len(replaced) > 0 && !optedIn(s.obj) {
		want.Spec.VolumeClaimTemplates = live.Spec.VolumeClaimTemplates
		msg := fmt.Sprintf("claims %s would need to be made again (a store shrank or its class or access modes changed), which deletes the shards' data: kept as they are; set %s: \"true\" on the BuildbarnStorage to allow it",
			strings.Join(replaced, ", "), storagev1alpha1.AllowDataLossAnnotation)
		s.degraded = append(s.degraded, msg)
		r.warn(s, "Refused", "%s", msg)
		return false, nil
	}
	if len(replaced) > 0 {
		if err := r.deleteReplacedClaims(ctx, s, replaced); err != nil {
			return false, err
		}
	}
	// Replaced claims need their pods gone too; grown ones keep them.
	policy := metav1.DeletePropagationOrphan
	if len(replaced) > 0 {
		policy = metav1.DeletePropagationBackground
	}
	if err := r.Delete(ctx, live, client.PropagationPolicy(policy)); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	r.event(s, "Recreating", "claim templates changed (grown: %v, replaced: %v): StatefulSet %s is made again with them", grown, replaced, live.Name)
	s.workload, s.requeue = statefulSetState(live), time.Second
	s.workload.replacing = true
	return true, nil
}

// grow asks for the template's new size on an existing claim; strata's
// CSI driver expands the volume and the filesystem online.
func (r *Reconciler) grow(ctx context.Context, s *scope, c *corev1.PersistentVolumeClaim, templates []corev1.PersistentVolumeClaim) error {
	size := templateSize(templates, claimTemplate(c.Name, s.owner.Name))
	have := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() || size.Cmp(have) <= 0 {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Resources.Requests[corev1.ResourceStorage] = size
	if err := r.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("growing claim %s to %s: %w", c.Name, size.String(), err)
	}
	r.event(s, "ClaimGrown", "claim %s grows from %s to %s", c.Name, have.String(), size.String())
	return nil
}

// claimsOf lists the storage's shard claims.
func (r *Reconciler) claimsOf(ctx context.Context, s *scope) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, list, client.InNamespace(s.owner.Namespace), client.MatchingLabels(s.owner.Selector())); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// claimTemplate is the template a StatefulSet claim was made from: its
// name is <template>-<set>-<ordinal>.
func claimTemplate(claim, set string) string {
	i := strings.LastIndex(claim, "-"+set+"-")
	if i < 0 {
		return ""
	}
	return claim[:i]
}

func templateSize(ts []corev1.PersistentVolumeClaim, name string) resource.Quantity {
	for _, t := range ts {
		if t.Name == name {
			return t.Spec.Resources.Requests[corev1.ResourceStorage]
		}
	}
	return resource.Quantity{}
}

// compareTemplates names the templates whose claims can grow in place,
// and those that need new claims.
func compareTemplates(live, want []corev1.PersistentVolumeClaim) (grown, replaced []string) {
	for _, w := range want {
		l := templateNamed(live, w.Name)
		if l == nil {
			replaced = append(replaced, w.Name)
			continue
		}
		ls, ws := l.Spec.Resources.Requests[corev1.ResourceStorage], w.Spec.Resources.Requests[corev1.ResourceStorage]
		sameClass := l.Spec.StorageClassName == nil || w.Spec.StorageClassName == nil || *l.Spec.StorageClassName == *w.Spec.StorageClassName
		switch {
		case !sameClass || !slices.Equal(l.Spec.AccessModes, w.Spec.AccessModes) || ws.Cmp(ls) < 0:
			replaced = append(replaced, w.Name)
		case ws.Cmp(ls) > 0:
			grown = append(grown, w.Name)
		}
	}
	return grown, replaced
}

// finalizeStorage deletes the shards' claims only with the opt-in; the
// StatefulSet and the rest go with their owner.
func finalizeStorage(ctx context.Context, r *Reconciler, obj Object) error {
	s := &scope{obj: obj, kindName: obj.GetObjectKind().GroupVersionKind().Kind, owner: objects.Owner{Name: obj.GetName(), Namespace: obj.GetNamespace(), Component: "storage"}}
	claims, err := r.claimsOf(ctx, s)
	if err != nil {
		return err
	}
	var names []string
	for _, c := range claims {
		names = append(names, c.Name)
		if !optedIn(obj) {
			continue
		}
		if err := r.Delete(ctx, &c); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	switch {
	case len(names) == 0:
	case optedIn(obj):
		r.warn(s, "ClaimsDeleted", "deleted the shards' claims %s (opted in with %s)", strings.Join(names, ", "), storagev1alpha1.AllowDataLossAnnotation)
	default:
		r.event(s, "ClaimsKept", "kept the shards' claims %s: they hold the cache; delete them by hand, or set %s: \"true\" before deleting", strings.Join(names, ", "), storagev1alpha1.AllowDataLossAnnotation)
	}
	return nil
}
