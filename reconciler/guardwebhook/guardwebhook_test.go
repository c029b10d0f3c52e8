package guardwebhook_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/guardtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/guard"
	"github.com/strata-gitops/strata/reconciler/guardwebhook"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// serve runs the guard over TLS, as the controller serves it, registers
// it for Flux's kustomize-controller's deletes, and returns a client
// acting as that controller once the API server calls the webhook.
func serve(t *testing.T, env *testenv.Env, ns string, configure ...func(*guardwebhook.Handler)) client.Client {
	t.Helper()
	testenv.FluxKustomizeControllerRights(t, env)
	w, err := guardtest.Serve(env.Client, env.Config, "strata-guard-"+ns, ns, configure...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	t.Cleanup(func() { _ = w.Register(context.Background(), false) })
	if err := w.Register(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return w.Flux()
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// Flux's deletes of a claim and of a Namespace holding one are refused
// with the engine's message; of a ConfigMap, of a claim carrying the
// opt-in, and anyone else's deletes, are not.
func TestFluxsDeletesOfDataAreRefused(t *testing.T) {
	env := testenv.Get(t)
	ns := testenv.Namespace(t, env.Client, fmt.Sprintf("guard-%d", os.Getpid()))
	flux := serve(t, env, ns)
	ctx := context.Background()
	data := guardtest.Claim(ns, "data", nil)
	optedIn := guardtest.Claim(ns, "scratch", map[string]string{guard.OptInAnnotation: "true"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	create(t, env.Client, data, optedIn, cm)

	err := flux.Delete(ctx, data)
	want := fmt.Sprintf("deletion of PersistentVolumeClaim/%s/data blocked: PersistentVolumeClaim holds data; to allow it, annotate the object or its Kustomization with %s: \"true\"", ns, guard.OptInAnnotation)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Flux's delete of a claim: %v; want %q", err, want)
	}
	err = flux.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err == nil || !strings.Contains(err.Error(), "Namespace still contains PersistentVolumeClaims") {
		t.Fatalf("Flux's delete of a Namespace holding claims: %v", err)
	}
	for _, o := range []client.Object{cm, optedIn} {
		if err := flux.Delete(ctx, o); err != nil {
			t.Fatalf("Flux's delete of %s: %v", o.GetName(), err)
		}
	}
	// A person's delete is not Flux's: the webhook is not even called.
	if err := env.Client.Delete(ctx, data); err != nil {
		t.Fatalf("an administrator's delete of the claim: %v", err)
	}
}

// Flux deletes as more than itself: as the service account a
// Kustomization names (or its --default-service-account), and through the
// garbage collector when an owner goes. Each of these deletes of a claim a
// Kustomization applied is refused; another account's, or the collector's
// of a claim no Kustomization applied, is not Flux's and passes.
func TestFluxsDeletesAsItsServiceAccountsAndTheCollectorAreJudged(t *testing.T) {
	env := testenv.Get(t)
	ns := testenv.Namespace(t, env.Client, fmt.Sprintf("guard-ids-%d", os.Getpid()))
	serve(t, env, ns, func(h *guardwebhook.Handler) { h.DefaultServiceAccount = "flux-default" })
	ctx := context.Background()
	sa := func(namespace, name string) string { return "system:serviceaccount:" + namespace + ":" + name }
	gc, kcm := guardwebhook.DefaultGarbageCollectors[0], guardwebhook.DefaultGarbageCollectors[1]
	// Every identity here may delete claims: only the guard stands
	// between them and the data.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guard-identities-" + ns},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: sa(ns, "tenant")}, {Kind: "User", Name: sa(ns, "flux-default")},
			{Kind: "User", Name: sa(ns, "other")}, {Kind: "User", Name: gc}, {Kind: "User", Name: kcm}}}
	create(t, env.Client, binding)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	kustomization := func(name, account string) *kustomizev1.Kustomization {
		return &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./", Prune: true, ServiceAccountName: account,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "none"}}}
	}
	create(t, env.Client, kustomization("tenant-apps", "tenant"), kustomization("default-apps", ""))
	claim := func(name, appliedBy string) *corev1.PersistentVolumeClaim {
		c := guardtest.Claim(ns, name, nil)
		if appliedBy != "" {
			c.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": appliedBy, "kustomize.toolkit.fluxcd.io/namespace": ns}
		}
		return c
	}
	refused := []struct {
		user  string
		claim *corev1.PersistentVolumeClaim
	}{
		{sa(ns, "tenant"), claim("by-tenant", "tenant-apps")},
		{sa(ns, "flux-default"), claim("by-default", "default-apps")},
		{gc, claim("collected", "tenant-apps")},
		{kcm, claim("collected-by-kcm", "default-apps")},
	}
	passed := []struct {
		user  string
		claim *corev1.PersistentVolumeClaim
	}{
		{sa(ns, "other"), claim("others", "tenant-apps")},
		{sa(ns, "tenant"), claim("tenants-of-default", "default-apps")},
		{gc, claim("unmanaged", "")},
	}
	for _, c := range append(refused, passed...) {
		create(t, env.Client, c.claim)
	}
	for _, c := range refused {
		as, err := guardtest.As(env.Config, c.user)
		if err != nil {
			t.Fatal(err)
		}
		err = as.Delete(ctx, c.claim.DeepCopy())
		want := fmt.Sprintf("deletion of PersistentVolumeClaim/%s/%s blocked", ns, c.claim.Name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s deleting %s: %v; want %q", c.user, c.claim.Name, err, want)
		}
		live := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c.claim), live); err != nil || live.DeletionTimestamp != nil {
			t.Errorf("claim %s after %s's refused delete: %v, deleting since %v", c.claim.Name, c.user, err, live.DeletionTimestamp)
		}
	}
	for _, c := range passed {
		as, err := guardtest.As(env.Config, c.user)
		if err != nil {
			t.Fatal(err)
		}
		if err := as.Delete(ctx, c.claim.DeepCopy()); err != nil {
			t.Errorf("%s deleting %s, which is not Flux acting: %v", c.user, c.claim.Name, err)
		}
	}
}
