package controller_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/rules"
)

// newStorage makes a storage of two shards and the claims its
// StatefulSet would have made (no StatefulSet controller runs here).
func newStorage(t *testing.T, c client.Client, ns string, annotations map[string]string) (*bbv1.BuildbarnStorage, []*corev1.PersistentVolumeClaim) {
	t.Helper()
	expandableClass(t, c)
	st := &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage"), Spec: bbv1.BuildbarnStorageSpec{ComponentSpec: spec(2)}}
	st.Annotations = annotations
	st.Spec.CAS.BlocksSize = ptr.To(resource.MustParse("1Gi"))
	st.Spec.CAS.KeyLocationMapSize = ptr.To(resource.MustParse("32Mi"))
	create(t, c, st)
	ss := waitFor(t, c, &appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")}, func(*appsv1.StatefulSet) error { return nil })
	var claims []*corev1.PersistentVolumeClaim
	for i := range 2 {
		for _, tmpl := range ss.Spec.VolumeClaimTemplates {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-storage-%d", tmpl.Name, i), Labels: tmpl.Labels},
				Spec: tmpl.Spec}
			create(t, c, pvc)
			// Bound, as the volume binder would have it: only a bound
			// claim can be resized.
			pvc.Status.Phase = corev1.ClaimBound
			if err := c.Status().Update(context.Background(), pvc); err != nil {
				t.Fatal(err)
			}
			claims = append(claims, pvc)
		}
	}
	return st, claims
}

// expandableClass makes strata-fast as the chart's LVMCluster would: the
// API server lets a claim grow only if its class allows expansion.
func expandableClass(t *testing.T, c client.Client) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: rules.BuildbarnStorageClass}, Provisioner: storagev1alpha1.CSIDriver,
		AllowVolumeExpansion: ptr.To(true)}
	if err := c.Create(context.Background(), sc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func claimTemplateSize(ss *appsv1.StatefulSet, name string) string {
	for _, t := range ss.Spec.VolumeClaimTemplates {
		if t.Name == name {
			q := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q.String()
		}
	}
	return ""
}

// A grown store grows every shard's existing claim and the StatefulSet
// is made again with the new template, adopting the pods; the claims are
// the same objects. A shrunk one is refused and changes nothing.
func TestAGrownStoreGrowsTheClaimsAndAShrunkOneIsRefused(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	ns := namespace(t, c)
	st, claims := newStorage(t, c, ns, nil)
	first := waitFor(t, c, &appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")}, func(*appsv1.StatefulSet) error { return nil }).UID

	testenv.Update(t, c, st, func(s *bbv1.BuildbarnStorage) { s.Spec.CAS.BlocksSize = ptr.To(resource.MustParse("3Gi")) })
	waitFor(t, c, &appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")}, func(ss *appsv1.StatefulSet) error {
		if ss.UID == first || claimTemplateSize(ss, "cas") != "4Gi" {
			return fmt.Errorf("the StatefulSet (uid %s) asks for %s of CAS", ss.UID, claimTemplateSize(ss, "cas"))
		}
		return nil
	})
	for _, pvc := range claims {
		want, uid := map[string]string{"cas": "4Gi"}[pvc.Name[:len(pvc.Name)-len("-storage-0")]], pvc.UID
		got := waitFor(t, c, pvc, func(p *corev1.PersistentVolumeClaim) error {
			size := p.Spec.Resources.Requests[corev1.ResourceStorage]
			if want != "" && size.String() != want {
				return fmt.Errorf("claim %s asks for %s, want %s", p.Name, size.String(), want)
			}
			return nil
		})
		if got.UID != uid || !got.DeletionTimestamp.IsZero() {
			t.Errorf("claim %s was replaced or is being deleted", got.Name)
		}
	}
	wantEvent(t, c, st, corev1.EventTypeNormal, "ClaimGrown", "grows from 2Gi to 4Gi")

	grown := waitFor(t, c, &appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")}, func(*appsv1.StatefulSet) error { return nil }).UID
	testenv.Update(t, c, st, func(s *bbv1.BuildbarnStorage) { s.Spec.CAS.BlocksSize = ptr.To(resource.MustParse("512Mi")) })
	waitComponent(t, c, st, condition(bbv1.ConditionDegraded, metav1.ConditionTrue, "ClaimChangeRefused"))
	wantEvent(t, c, st, corev1.EventTypeWarning, "Refused", "claims cas would need to be made again")
	ss := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "storage"}, ss); err != nil {
		t.Fatal(err)
	}
	if ss.UID != grown || claimTemplateSize(ss, "cas") != "4Gi" {
		t.Errorf("a refused shrink changed the StatefulSet: uid %s, CAS %s", ss.UID, claimTemplateSize(ss, "cas"))
	}
	for _, pvc := range claims {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil || !pvc.DeletionTimestamp.IsZero() {
			t.Errorf("claim %s after a refused shrink: %v, deleting since %v", pvc.Name, err, pvc.DeletionTimestamp)
		}
	}

	// With the opt-in, the shrunk store's claims are made again.
	testenv.Update(t, c, st, func(s *bbv1.BuildbarnStorage) {
		s.Annotations = map[string]string{storagev1alpha1.AllowDataLossAnnotation: "true"}
	})
	waitFor(t, c, &appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")}, func(ss *appsv1.StatefulSet) error {
		if ss.UID == grown || claimTemplateSize(ss, "cas") != "1Gi" {
			return fmt.Errorf("the StatefulSet (uid %s) still asks for %s of CAS", ss.UID, claimTemplateSize(ss, "cas"))
		}
		return nil
	})
	for _, pvc := range claims {
		wantDeleted := pvc.Name[:3] == "cas"
		err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
		deleted := apierrors.IsNotFound(err) || err == nil && !pvc.DeletionTimestamp.IsZero()
		if deleted != wantDeleted {
			t.Errorf("claim %s deleted: %v, want %v", pvc.Name, deleted, wantDeleted)
		}
	}
}

// Deleting a storage keeps its shards' claims, unless it opted in.
func TestADeletedStorageKeepsItsClaimsUnlessOptedIn(t *testing.T) {
	c := start(t)
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("opt-in=%v", optIn), func(t *testing.T) {
			ns := namespace(t, c)
			var ann map[string]string
			if optIn {
				ann = map[string]string{storagev1alpha1.AllowDataLossAnnotation: "true"}
			}
			st, claims := newStorage(t, c, ns, ann)
			waitFor(t, c, st, func(s *bbv1.BuildbarnStorage) error {
				if len(s.Finalizers) == 0 {
					return fmt.Errorf("no finalizer yet")
				}
				return nil
			})
			if err := c.Delete(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			waitGone(t, c, &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage")})
			// What it owned goes with it (Kubernetes' garbage collector);
			// the claims are not owned, and stay unless opted in.
			for _, owned := range []client.Object{&appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")},
				&corev1.ConfigMap{ObjectMeta: meta(ns, "storage-config")}, &corev1.Service{ObjectMeta: meta(ns, "storage")}} {
				waitGone(t, c, owned)
			}
			for _, pvc := range claims {
				err := c.Get(context.Background(), client.ObjectKeyFromObject(pvc), pvc)
				deleted := apierrors.IsNotFound(err) || err == nil && !pvc.DeletionTimestamp.IsZero()
				if deleted != optIn {
					t.Errorf("claim %s deleted: %v (err %v), want %v", pvc.Name, deleted, err, optIn)
				}
			}
			reason := map[bool]string{false: "ClaimsKept", true: "ClaimsDeleted"}[optIn]
			typ := map[bool]string{false: corev1.EventTypeNormal, true: corev1.EventTypeWarning}[optIn]
			wantEvent(t, c, st, typ, reason, "cas-storage-0")
		})
	}
}
