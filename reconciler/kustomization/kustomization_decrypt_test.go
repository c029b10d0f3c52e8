package kustomization_test

import (
	"context"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/sopstest"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// A Secret kept in Git encrypted by the sops CLI for an age key is
// applied decrypted with spec.decryption naming the Secret that holds the
// key; with another key the Kustomization is DecryptionFailed, naming
// the recipient, applies nothing, and no status or event holds the value.
func TestSopsEncryptedSecretsApplyDecrypted(t *testing.T) {
	s := newStack(t)
	key, other := sopstest.NewKey(t), sopstest.NewKey(t)
	const password = "plaintext-kept-in-git-only-encrypted"
	enc := sopstest.Encrypt(t, "creds.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: "+password+"\n", key.Recipient)
	for name, id := range map[string]string{"sops-age": key.Identity, "wrong-age": other.Identity} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Data: map[string][]byte{"age.agekey": []byte(id)}}
		if err := s.c.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
	}
	rev := s.push(map[string]string{"app/creds.yaml": enc, "wrong/creds.yaml": strings.Replace(enc, "name: creds", "name: wrong-creds", 1)})
	s.source(rev)
	decryptWith := func(secret string) func(*kustomizev1.Kustomization) {
		return func(k *kustomizev1.Kustomization) {
			k.Spec.Decryption = &kustomizev1.Decryption{Provider: "sops", SecretRef: &meta.LocalObjectReference{Name: secret}}
		}
	}
	s.kustomization("app", "./app", decryptWith("sops-age"))
	s.waitReady("app", rev)
	got := &corev1.Secret{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "creds"}, got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["password"]) != password {
		t.Fatalf("the applied Secret holds %q, want the decrypted value", got.Data["password"])
	}

	s.kustomization("wrong", "./wrong", decryptWith("wrong-age"))
	ks := s.waitCondition("wrong", meta.ReadyCondition, metav1.ConditionFalse, kustomization.DecryptionFailedReason, key.Recipient, "creds.yaml")
	if s.exists(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong-creds"}}) {
		t.Error("a Kustomization that failed to decrypt applied its Secret")
	}
	events := &corev1.EventList{}
	if err := s.c.List(context.Background(), events, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, password) {
			t.Errorf("event %s holds the plaintext: %s", e.Name, e.Message)
		}
	}
	for _, c := range append(ks.Status.Conditions, s.get("app").Status.Conditions...) {
		if strings.Contains(c.Message, password) {
			t.Errorf("condition %s holds the plaintext", c.Type)
		}
	}
}
