package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/dashboard"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// The GitOps page draws the dependsOn graph: states as colours, a cycle
// drawn as one, the guard's kept deletions on their Kustomization.
func TestTheGitOpsPageDrawsTheGraphAndACycle(t *testing.T) {
	f := newFixture(t)
	makeGraph(t, f)
	for i, reason := range []string{"Progressing", "ReconciliationSucceeded", "DependencyNotReady", "DeletionBlocked"} {
		at := metav1.NewTime(time.Now().Add(time.Duration(i-10) * time.Minute))
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("infra.%d", i), Namespace: f.mine},
			InvolvedObject: corev1.ObjectReference{Kind: "Kustomization", APIVersion: "kustomize.toolkit.fluxcd.io/v1", Namespace: f.mine, Name: "infra"},
			Reason:         reason, Message: "event " + reason, Type: corev1.EventTypeNormal, FirstTimestamp: at, LastTimestamp: at}
		if err := f.env.Client.Create(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := f.serve(t, dashboard.Open{})
	_, body := get(t, srv.URL+"/gitops", "")
	key := func(name string) string { return `data-ks="` + f.mine + "/" + name + `"` }
	for _, want := range []string{
		key("infra") + ` data-state="Ready"`, key("apps"), key("left") + ` data-state="Reconciling" data-cycle="true"`,
		key("right") + ` data-state="Reconciling" data-cycle="true"`, `class="edge cycle"`, `data-mark="cycle"`,
		`data-mark="protected"`, "deletion of PersistentVolumeClaim/apps/data blocked", "<td>2</td>",
		`data-reason="DeletionBlocked"`, `data-reason="DependencyNotReady"`, `data-reason="ReconciliationSucceeded"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the GitOps page lacks %s", want)
		}
	}
	if n := strings.Count(body, `data-to="`+f.mine+"/"); n != 3 {
		t.Errorf("%d edges drawn, want 3 (apps on infra, left and right on each other)", n)
	}
	if strings.Contains(body, `data-reason="Progressing"`) {
		t.Error("more than the latest three events shown")
	}
	if strings.Contains(body, key("apps")+` data-state="Reconciling" data-cycle`) {
		t.Error("a Kustomization outside the cycle is drawn in it")
	}
}

// makeGraph makes Kustomizations in f.mine: infra Ready with two objects
// and a kept deletion, apps on infra, and left and right on each other.
func makeGraph(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	c := f.env.Client
	ks := func(name string, deps ...string) *kustomizev1.Kustomization {
		k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.mine},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./" + name, Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster"}}}
		for _, d := range deps {
			k.Spec.DependsOn = append(k.Spec.DependsOn, kustomizev1.DependencyReference{Name: d})
		}
		if err := c.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	infra := ks("infra")
	ks("apps", "infra")
	ks("left", "right")
	ks("right", "left")
	now := metav1.Now()
	infra.Status.LastAppliedRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	infra.Status.Inventory = &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{{ID: "a_b_c_d", Version: "v1"}, {ID: "e_f_g_h", Version: "v1"}}}
	infra.Status.Conditions = []metav1.Condition{
		{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.ReconciliationSucceededReason, Message: "applied", LastTransitionTime: now},
		{Type: kustomization.DataProtectedCondition, Status: metav1.ConditionTrue, Reason: kustomization.DeletionBlockedReason,
			Message: "deletion of PersistentVolumeClaim/apps/data blocked", LastTransitionTime: now},
	}
	if err := c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
}
