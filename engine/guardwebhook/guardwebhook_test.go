package guardwebhook_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/strata-gitops/strata/engine/guard"
	"github.com/strata-gitops/strata/engine/guardwebhook"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/agenttls"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// serve runs the guard over TLS, as the controller serves it, and
// registers it with the API server for Flux's kustomize-controller's
// deletes; it returns a client acting as that controller once the API
// server calls the webhook.
func serve(t *testing.T, env *testenv.Env, ns string) client.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(guardwebhook.Path, &admission.Webhook{Handler: &guardwebhook.Handler{Reader: env.Client}})
	served, err := agenttls.Serve(mux)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(served.Srv.Close)
	url := served.Srv.URL + guardwebhook.Path
	cfg := guardwebhook.Configuration("strata-guard-"+ns, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: served.CAPEM},
		guardwebhook.DefaultUsers)
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
	testenv.FluxKustomizeControllerRights(t, env)
	flux, err := client.New(testenv.ServiceAccountConfig(env.Config, "flux-system", "kustomize-controller"), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	// The API server takes the configuration from its informer: once a
	// dry-run delete of a claim is refused, it calls the webhook.
	probe := claim(ns, "probe", nil)
	create(t, env.Client, probe)
	testenv.Eventually(t, 30*time.Second, func() error {
		err := flux.Delete(context.Background(), probe, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "blocked") {
			return fmt.Errorf("a dry-run delete of a claim: %v; the webhook is not called yet", err)
		}
		return nil
	})
	return flux
}

func claim(ns, name string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
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
	data := claim(ns, "data", nil)
	optedIn := claim(ns, "scratch", map[string]string{guard.OptInAnnotation: "true"})
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
