package kustomization_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/guard"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func (s *stack) annotate(obj client.Object, key, value string) {
	s.t.Helper()
	if obj.GetNamespace() == "" && !isClusterScoped(obj) {
		obj.SetNamespace(s.ns)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := s.c.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) warningEvent(reason, fragment string) {
	s.t.Helper()
	testenv.Eventually(s.t, timeout, func() error {
		list := &eventsv1.EventList{}
		if err := s.c.List(context.Background(), list, client.InNamespace(s.ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Note, fragment) {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s mentioning %q among %d events", reason, fragment, len(list.Items))
	})
}

func TestPruneNeverDeletesPVCWithoutOptIn(t *testing.T) {
	s := newStack(t)
	s.applied("app", "./app", map[string]string{"app/pvc.yaml": pvc("data", "local"), "app/cm.yaml": configMap("a"), "app/keep.yaml": configMap("keep")})

	rev := s.push(map[string]string{"app/pvc.yaml": "", "app/cm.yaml": ""})
	s.refresh(rev)
	ks := s.waitReady("app", rev)
	s.waitCondition("app", kustomization.DataProtectedCondition, metav1.ConditionTrue, kustomization.DeletionBlockedReason,
		"PersistentVolumeClaim/"+s.ns+"/data", guard.OptInAnnotation)
	s.warningEvent(kustomization.DeletionBlockedReason, "PersistentVolumeClaim/"+s.ns+"/data")
	if !s.exists(claim("data")) {
		t.Fatal("prune deleted a PVC without the opt-in")
	}
	if s.exists(cm("a")) {
		t.Error("the ConfigMap beside the protected PVC was not pruned")
	}
	if len(ks.Status.Inventory.Entries) != 2 {
		t.Errorf("the protected PVC left the inventory: %+v", ks.Status.Inventory)
	}

	// With the opt-in on the live object, the next reconcile prunes it.
	s.annotate(claim("data"), guard.OptInAnnotation, "true")
	s.request(s.get("app"))
	testenv.Eventually(t, timeout, func() error {
		if s.exists(claim("data")) {
			return fmt.Errorf("opted-in PVC still exists")
		}
		return nil
	})
	s.waitReady("app", rev)
	if ks := s.get("app"); len(ks.Status.Inventory.Entries) != 1 || hasCondition(ks, kustomization.DataProtectedCondition) {
		t.Errorf("after the opt-in prune, status still shows it: %+v", ks.Status)
	}
}

func hasCondition(ks *kustomizev1.Kustomization, kind string) bool {
	for _, c := range ks.Status.Conditions {
		if c.Type == kind {
			return true
		}
	}
	return false
}

// TestRenamedKustomizationKeepsItsObjects is Flux #3316: a Kustomization
// renamed in Git (new one created, old one deleted with prune) must not
// delete what the new one now owns.
func TestRenamedKustomizationKeepsItsObjects(t *testing.T) {
	s := newStack(t)
	rev := s.applied("old-name", "./app", map[string]string{"app/pvc.yaml": pvc("data", "local"), "app/cm.yaml": configMap("a")})
	s.kustomization("new-name", "./app", nil)
	s.waitReady("new-name", rev)
	if err := s.c.Delete(context.Background(), s.get("old-name")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, func() error {
		err := s.c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "old-name"}, &kustomizev1.Kustomization{})
		if err == nil {
			return fmt.Errorf("old Kustomization still exists")
		}
		return client.IgnoreNotFound(err)
	})
	if !s.exists(claim("data")) || !s.exists(cm("a")) {
		t.Fatal("deleting the renamed Kustomization deleted objects the new one owns")
	}
}

func TestDeletionPolicyKeepsPVCUnlessOptedIn(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/pvc.yaml": pvc("data", "local"), "app/cm.yaml": configMap("a"),
		"optin/pvc.yaml": pvc("scratch", "local"), "optin/cm.yaml": configMap("b")})
	s.source(rev)
	s.kustomization("app", "./app", nil)
	s.kustomization("optin", "./optin", func(k *kustomizev1.Kustomization) {
		k.Annotations = map[string]string{guard.OptInAnnotation: "true"}
	})
	s.waitReady("app", rev)
	s.waitReady("optin", rev)
	for _, name := range []string{"app", "optin"} {
		if err := s.c.Delete(context.Background(), s.get(name)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, timeout, func() error {
		if s.exists(cm("a")) || s.exists(cm("b")) || s.exists(claim("scratch")) {
			return fmt.Errorf("deletionPolicy did not delete the unprotected and opted-in objects")
		}
		return nil
	})
	if !s.exists(claim("data")) {
		t.Fatal("deleting a Kustomization deleted its PVC without the opt-in")
	}
	s.warningEvent(kustomization.DeletionBlockedReason, "PersistentVolumeClaim/"+s.ns+"/data")
}

// TestForceNeverRecreatesPVC is Flux #4392: force with an immutable PVC
// change must fail, naming the field, and keep the PVC; other immutable
// objects are still recreated.
func TestForceNeverRecreatesPVC(t *testing.T) {
	s := newStack(t)
	immutableCM := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\nimmutable: true\ndata:\n  v: " + v + "\n"
	}
	rev := s.push(map[string]string{"pvc/pvc.yaml": pvc("data", "fast"), "cm/cm.yaml": immutableCM("one")})
	s.source(rev)
	s.kustomization("pvc", "./pvc", func(k *kustomizev1.Kustomization) { k.Spec.Force = true })
	s.kustomization("cm", "./cm", func(k *kustomizev1.Kustomization) { k.Spec.Force = true })
	s.waitReady("pvc", rev)
	s.waitReady("cm", rev)
	before := claim("data")
	s.exists(before)

	rev = s.push(map[string]string{"pvc/pvc.yaml": pvc("data", "slow"), "cm/cm.yaml": immutableCM("two")})
	s.refresh(rev)
	s.waitCondition("pvc", meta.ReadyCondition, metav1.ConditionFalse, kustomization.DeletionBlockedReason,
		"PersistentVolumeClaim/"+s.ns+"/data", "immutable", guard.OptInAnnotation)
	after := claim("data")
	if !s.exists(after) || after.UID != before.UID || *after.Spec.StorageClassName != "fast" {
		t.Fatalf("force recreated or changed the PVC: uid %s -> %s, class %v", before.UID, after.UID, after.Spec.StorageClassName)
	}
	s.waitReady("cm", rev)
	frozen := cm("frozen")
	if !s.exists(frozen) || frozen.Data["v"] != "two" {
		t.Errorf("force did not recreate the immutable ConfigMap: %v", frozen.Data)
	}
}

// TestStaticPVKeepsBinderClaimUID is Flux #2250: the binder sets
// claimRef.uid on a static PV; applying the PV from Git again must keep it.
func TestStaticPVKeepsBinderClaimUID(t *testing.T) {
	s := newStack(t)
	pvName := s.ns + "-pv"
	pv := func(label string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
  labels:
    rev: %q
spec:
  capacity:
    storage: 1Gi
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  hostPath:
    path: /srv/data
  claimRef:
    namespace: %s
    name: data
`, pvName, label, s.ns)
	}
	rev := s.push(map[string]string{"pv/pv.yaml": pv("one")})
	s.source(rev)
	s.kustomization("pv", "./pv", func(k *kustomizev1.Kustomization) { k.Spec.TargetNamespace = "" })
	s.waitReady("pv", rev)

	live := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}}
	s.exists(live)
	live.Spec.ClaimRef.UID = "0b5d4b2e-0000-4000-8000-000000000001"
	if err := s.c.Update(context.Background(), live, client.FieldOwner("kube-controller-manager")); err != nil {
		t.Fatal(err)
	}
	rev = s.push(map[string]string{"pv/pv.yaml": pv("two")})
	s.refresh(rev)
	s.waitReady("pv", rev)
	s.exists(live)
	if live.Labels["rev"] != "two" {
		t.Fatalf("the new revision was not applied: %v", live.Labels)
	}
	if live.Spec.ClaimRef == nil || live.Spec.ClaimRef.UID != "0b5d4b2e-0000-4000-8000-000000000001" {
		t.Fatalf("claimRef.uid set by the binder was lost: %+v", live.Spec.ClaimRef)
	}
	if err := s.c.Delete(context.Background(), live); err != nil {
		t.Fatal(err)
	}
}

// TestPVCVolumeNameDoesNotFailDryRun is Flux #2386: a PVC whose volumeName
// is set in the cluster (by the binder, or by an earlier revision in Git)
// must apply cleanly when Git leaves volumeName out.
func TestPVCVolumeNameDoesNotFailDryRun(t *testing.T) {
	s := newStack(t)
	withVolume := strings.Replace(pvc("pinned", "local"), "spec:\n", "spec:\n  volumeName: pv-a\n", 1)
	s.applied("app", "./app", map[string]string{"app/pinned.yaml": withVolume, "app/bound.yaml": pvc("bound", "local")})

	bound := claim("bound")
	s.exists(bound)
	bound.Spec.VolumeName = "pv-b"
	if err := s.c.Update(context.Background(), bound, client.FieldOwner("kube-controller-manager")); err != nil {
		t.Fatal(err)
	}
	rev := s.push(map[string]string{
		"app/pinned.yaml": pvc("pinned", "local", "rev", "two"),
		"app/bound.yaml":  pvc("bound", "local", "rev", "two"),
	})
	s.refresh(rev)
	s.waitReady("app", rev)
	for name, volume := range map[string]string{"pinned": "pv-a", "bound": "pv-b"} {
		c := claim(name)
		s.exists(c)
		if c.Spec.VolumeName != volume || c.Annotations["rev"] != "two" {
			t.Errorf("PVC %s: volumeName %q annotations %v, want %s and the new revision", name, c.Spec.VolumeName, c.Annotations, volume)
		}
	}
}

func TestNamespaceWithPVCIsNotPruned(t *testing.T) {
	s := newStack(t)
	other := s.ns + "-data"
	nsYAML := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + other + "\n"
	claimYAML := strings.Replace(pvc("data", "local"), "  name: data\n", "  name: data\n  namespace: "+other+"\n", 1)
	keepNS := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + other + "-keep\n"
	rev := s.push(map[string]string{"ns/ns.yaml": nsYAML, "ns/keep.yaml": keepNS})
	s.source(rev)
	s.kustomization("ns", "./ns", func(k *kustomizev1.Kustomization) { k.Spec.TargetNamespace = "" })
	s.kustomization("data", "./data", func(k *kustomizev1.Kustomization) { k.Spec.TargetNamespace = "" })
	rev = s.push(map[string]string{"data/pvc.yaml": claimYAML})
	s.refresh(rev)
	s.waitReady("data", rev)

	rev = s.push(map[string]string{"ns/ns.yaml": ""})
	s.refresh(rev)
	s.waitCondition("ns", kustomization.DataProtectedCondition, metav1.ConditionTrue, kustomization.DeletionBlockedReason,
		"Namespace/"+other, "PersistentVolumeClaims")
	if !s.exists(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}) {
		t.Fatal("a Namespace holding a PVC was pruned")
	}
}

func TestCRDWithObjectsIsNotPruned(t *testing.T) {
	s := newStack(t)
	group := strings.ReplaceAll(s.ns, "-", "") + ".example.com"
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group)
	keep := strings.Replace(configMap("a"), "  name: a\n", "  name: a\n  namespace: "+s.ns+"\n", 1)
	rev := s.push(map[string]string{"crds/crd.yaml": crd, "crds/cm.yaml": keep})
	s.source(rev)
	s.kustomization("crds", "./crds", func(k *kustomizev1.Kustomization) { k.Spec.TargetNamespace = "" })
	s.waitReady("crds", rev)
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(group + "/v1")
	widget.SetKind("Widget")
	widget.SetNamespace(s.ns)
	widget.SetName("w1")
	testenv.Eventually(t, timeout, func() error { return s.c.Create(context.Background(), widget) })

	rev = s.push(map[string]string{"crds/crd.yaml": ""})
	_ = rev
	s.refresh(rev)
	s.waitCondition("crds", kustomization.DataProtectedCondition, metav1.ConditionTrue, kustomization.DeletionBlockedReason,
		"CustomResourceDefinition/widgets."+group, "Widget")
	if !s.exists(&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group}}) {
		t.Fatal("a CRD that still has objects was pruned")
	}
}
