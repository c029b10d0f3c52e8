package kustomization_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// A Kustomization with spec.kubeConfig applies to the cluster its Secret
// reaches, a second real API server here: its objects land there and not
// here, Ready names that cluster, prune and the data-loss guard act there;
// once that cluster cannot be reached, it is Ready=False with the reason
// and nothing is pruned anywhere.
func TestARemoteClusterGetsTheObjectsAndTheGuard(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	remote, err := testenv.StartAPIServer(nil)
	if err != nil {
		testenv.Unavailable(t, "a second API server: "+err.Error())
	}
	t.Cleanup(func() { _ = remote.Stop() })
	if err := remote.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(remote.KubeconfigFile(t))
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: s.ns}, Data: map[string][]byte{"value": kubeconfig}}
	if err := s.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rev := s.push(map[string]string{"app/a.yaml": configMap("a"), "app/b.yaml": configMap("b"), "app/data.yaml": pvc("data", "local")})
	s.source(rev)
	s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) {
		k.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "remote"}}
	})
	ks := s.waitReady("app", rev)
	onRemote := func(obj client.Object) bool {
		obj.SetNamespace(s.ns)
		err := remote.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return err == nil && obj.GetDeletionTimestamp() == nil
	}
	if !onRemote(cm("a")) || !onRemote(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}}) {
		t.Fatal("the objects are not on the remote cluster")
	}
	if s.exists(cm("a")) {
		t.Fatal("a Kustomization for another cluster applied to this one")
	}
	if c := apimeta.FindStatusCondition(ks.Status.Conditions, kustomization.ClusterCondition); c == nil || c.Message != strings.TrimSuffix(remote.Config.Host, "/") {
		t.Fatalf("the %s condition is %+v; want the remote server %s", kustomization.ClusterCondition, c, remote.Config.Host)
	}

	rev = s.push(map[string]string{"app/a.yaml": "", "app/data.yaml": ""})
	s.refresh(rev)
	s.waitCondition("app", kustomization.DataProtectedCondition, metav1.ConditionTrue, kustomization.DeletionBlockedReason, "data")
	testenv.Eventually(t, timeout, func() error {
		if onRemote(cm("a")) {
			return errString("ConfigMap a not pruned from the remote cluster yet")
		}
		return nil
	})
	if !onRemote(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}}) {
		t.Fatal("the guard let the remote claim be pruned")
	}

	secret.Data["value"] = []byte(strings.ReplaceAll(string(kubeconfig), strings.TrimSuffix(remote.Config.Host, "/"), "https://127.0.0.1:1"))
	if err := s.c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rev = s.push(map[string]string{"app/b.yaml": "", "app/c.yaml": configMap("c")})
	s.refresh(rev)
	s.waitCondition("app", meta.ReadyCondition, metav1.ConditionFalse, meta.ReconciliationFailedReason,
		"https://127.0.0.1:1", "cannot be reached", "nothing was applied or pruned")
	if !onRemote(cm("b")) {
		t.Fatal("ConfigMap b was pruned while its cluster could not be reached")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// A tenant's kubeconfig is input, not configuration: one naming an exec
// credential plugin must not run it inside the controller, and one naming
// a tokenFile with a server of the tenant's must not send the controller's
// file there. Each is Ready=False naming the field, and the server the
// tenant chose never hears from the controller.
func TestARemoteKubeconfigCannotRunCommandsOrReadFiles(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	var requests atomic.Int32
	listener := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusForbidden)
	}))
	t.Cleanup(listener.Close)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	secretFile := filepath.Join(dir, "token")
	if err := os.WriteFile(secretFile, []byte("the-controllers-own-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	rev := s.push(map[string]string{"app/a.yaml": configMap("a")})
	s.source(rev)
	for name, user := range map[string]string{
		"exec":      fmt.Sprintf("exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'touch %s'], interactiveMode: Never}", marker),
		"tokenFile": "tokenFile: " + secretFile,
	} {
		kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: false}}]
users: [{name: u, user: {%s}}]
`, listener.URL, user)
		secretName := strings.ToLower(name)
		if err := s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: s.ns}, Data: map[string][]byte{"value": []byte(kubeconfig)}}); err != nil {
			t.Fatal(err)
		}
		s.kustomization(secretName, "./app", func(k *kustomizev1.Kustomization) {
			k.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: secretName}}
		})
		s.waitCondition(secretName, meta.ReadyCondition, metav1.ConditionFalse, meta.ReconciliationFailedReason,
			"secret '"+s.ns+"/"+secretName+"'", "field "+name+" is refused", "nothing was applied or pruned")
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the exec plugin ran inside the controller (%s: %v)", marker, err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the tenant's server was called %d times", n)
	}
	if s.exists(cm("a")) {
		t.Fatal("a refused kubeConfig applied to this cluster")
	}
}
