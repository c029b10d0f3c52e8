package guardwebhook_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/engine/guard"
	"github.com/strata-gitops/strata/internal/testing/guardtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// serve runs the guard over TLS, as the controller serves it, registers
// it for Flux's kustomize-controller's deletes, and returns a client
// acting as that controller once the API server calls the webhook.
func serve(t *testing.T, env *testenv.Env, ns string) client.Client {
	t.Helper()
	testenv.FluxKustomizeControllerRights(t, env)
	w, err := guardtest.Serve(env.Client, env.Config, "strata-guard-"+ns, ns)
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
