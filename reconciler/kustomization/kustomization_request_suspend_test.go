package kustomization_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestRequestedAtCorrectsDrift edits an applied object by hand; `flux
// reconcile ks` (the requestedAt annotation) must put Git's state back and
// record the request as handled.
func TestRequestedAtCorrectsDrift(t *testing.T) {
	s := newStack(t)
	s.applied("app", "./app", map[string]string{"app/a.yaml": configMap("a", "key", "git")})
	a := cm("a")
	s.exists(a)
	a.Data["key"] = "hand-edited"
	if err := s.c.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	at := s.request(s.get("app"))
	testenv.Eventually(t, timeout, func() error {
		s.exists(a)
		if ks := s.get("app"); a.Data["key"] != "git" || ks.Status.LastHandledReconcileAt != at {
			return fmt.Errorf("data %v, lastHandledReconcileAt %q (want %q)", a.Data, ks.Status.LastHandledReconcileAt, at)
		}
		return nil
	})
}

func TestSuspendedKustomizationIsLeftAlone(t *testing.T) {
	s := newStack(t)
	rev := s.applied("app", "./app", map[string]string{"app/a.yaml": configMap("a", "key", "one")})
	ks := s.get("app")
	ks.Spec.Suspend = true
	if err := s.c.Update(context.Background(), ks); err != nil {
		t.Fatal(err)
	}
	next := s.push(map[string]string{"app/a.yaml": configMap("a", "key", "two")})
	s.refresh(next)
	at := s.request(s.get("app"))
	// Suspension is the absence of action: watch for a bounded time that
	// nothing is applied or recorded.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		a := cm("a")
		s.exists(a)
		got := s.get("app")
		if a.Data["key"] != "one" || got.Status.LastHandledReconcileAt == at || got.Status.LastAppliedRevision != rev {
			t.Fatalf("suspended Kustomization acted: data %v, status %+v", a.Data, got.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ks = s.get("app")
	ks.Spec.Suspend = false
	if err := s.c.Update(context.Background(), ks); err != nil {
		t.Fatal(err)
	}
	s.waitReady("app", next)
}

// TestPushThenReceiverHookApplies is the webhook path: a push, then the
// forge's call to the Receiver, must land the commit without waiting for
// any interval (both are an hour here).
func TestPushThenReceiverHookApplies(t *testing.T) {
	s := newStack(t)
	s.applied("app", "./app", map[string]string{"app/a.yaml": configMap("a", "key", "one")})
	if err := s.c.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-token", Namespace: s.ns},
		StringData: map[string]string{"token": "t0ken"},
	}); err != nil {
		t.Fatal(err)
	}
	rcv := &notificationv1.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: "git-push", Namespace: s.ns, Labels: s.labels()},
		Spec: notificationv1.ReceiverSpec{
			Type:      notificationv1.GitLabReceiver,
			Events:    []string{"Push Hook"},
			SecretRef: &meta.LocalObjectReference{Name: "webhook-token"},
			Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{
				APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "GitRepository", Name: "flux-system"}}},
		},
	}
	if err := s.c.Create(context.Background(), rcv); err != nil {
		t.Fatal(err)
	}
	wantPath := rcv.GetWebhookPath("t0ken")
	testenv.Eventually(t, timeout, func() error {
		if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(rcv), rcv); err != nil {
			return err
		}
		if rcv.Status.WebhookPath != wantPath {
			return fmt.Errorf("webhookPath %q, want %q", rcv.Status.WebhookPath, wantPath)
		}
		return nil
	})

	next := s.push(map[string]string{"app/a.yaml": configMap("a", "key", "two")})
	call := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.receiver+wantPath, nil)
		req.Header.Set("X-Gitlab-Token", token)
		req.Header.Set("X-Gitlab-Event", "Push Hook")
		var code int
		testenv.Eventually(t, timeout, func() error {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			code = resp.StatusCode
			if code == http.StatusNotFound {
				return fmt.Errorf("receiver not indexed yet")
			}
			return nil
		})
		return code
	}
	if code := call("wrong"); code != http.StatusUnauthorized {
		t.Fatalf("a call with the wrong token got %d, want 401", code)
	}
	if code := call("t0ken"); code != http.StatusOK {
		t.Fatalf("hook call got %d", code)
	}
	s.waitReady("app", next)
	a := cm("a")
	s.exists(a)
	if a.Data["key"] != "two" {
		t.Errorf("pushed change not applied: %v", a.Data)
	}
}

// TestRestartMidChainLosesNothing stops the controller while a chain is
// being applied and starts a new one on the same state.
func TestRestartMidChainLosesNothing(t *testing.T) {
	s := newStack(t)
	chain := []string{"one", "two", "three", "four"}
	files := map[string]string{}
	for _, n := range chain {
		files[n+"/cm.yaml"] = configMap(n)
	}
	rev := s.push(files)
	s.source(rev)
	for i, n := range chain {
		var mutate func(*kustomizev1.Kustomization)
		if i > 0 {
			mutate = dependsOn(chain[i-1])
		}
		s.kustomization(n, "./"+n, mutate)
	}
	s.waitReady("one", rev)
	s.stopController()
	s.startController()
	for _, n := range chain {
		ks := s.waitReady(n, rev)
		if len(ks.Status.Inventory.Entries) != 1 || !s.exists(cm(n)) {
			t.Errorf("%s after restart: inventory %+v", n, ks.Status.Inventory)
		}
	}
}
