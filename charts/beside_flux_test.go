package charts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/guardwebhook"
)

// fluxCluster is an API server as Flux leaves it: Flux's own CRDs (its
// controllers' v1.9 ones, and the Kustomization CRD of its API module),
// its objects in flux-system, and its kustomize-controller Deployment.
func fluxCluster(t *testing.T) *testenv.Env {
	t.Helper()
	ksDir := t.TempDir()
	ks := "kustomize.toolkit.fluxcd.io_kustomizations.yaml"
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "strata", "crds", ks))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ksDir, ks), data, 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.StartAPIServerWithCRDs(nil, testenv.FluxCRDDir(t), ksDir)
	if err != nil {
		testenv.Unavailable(t, "starting an API server: "+err.Error())
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns := "flux-system"
	labels := map[string]string{"app": "kustomize-controller"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kustomize-controller", Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "kustomize-controller:v1.9.4"}}}}}},
		&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "flux-system", Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{URL: "https://git.example/cluster", Interval: metav1.Duration{Duration: time.Minute}}},
		&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "flux-system", Namespace: ns},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Minute}, Path: "./clusters/home", Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"}}},
		&notificationv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: ns},
			Spec: notificationv1.ReceiverSpec{Type: "generic", SecretRef: &meta.LocalObjectReference{Name: "token"},
				Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "flux-system"}}}}},
		&notificationv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "slack", Namespace: ns},
			Spec: notificationv1beta3.ProviderSpec{Type: "slack", Address: "https://hooks.slack.example/x"}},
		&notificationv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
			Spec: notificationv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "slack"},
				EventSources: []notificationv1.CrossNamespaceObjectReference{{Kind: "Kustomization", Name: "*"}}}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// fluxState is every Flux CRD and object, by name, with what would show a
// change: its resource version.
func fluxState(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	state := map[string]string{}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if strings.HasSuffix(crd.Spec.Group, ".toolkit.fluxcd.io") {
			state["crd/"+crd.Name] = crd.ResourceVersion
		}
	}
	lists := []client.ObjectList{&sourcev1.GitRepositoryList{}, &kustomizev1.KustomizationList{}, &notificationv1.ReceiverList{},
		&notificationv1beta3.ProviderList{}, &notificationv1beta3.AlertList{}}
	for _, l := range lists {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		items, err := apimeta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			co := o.(client.Object)
			state[fmt.Sprintf("%T/%s/%s", co, co.GetNamespace(), co.GetName())] = co.GetResourceVersion()
		}
	}
	return state
}

// Storage-only mode installs where Flux runs and changes nothing of
// Flux's: not a CRD (Helm creates only the CRDs a cluster lacks) and not
// an object, neither at install nor once its controller runs.
func TestStorageOnlyInstallsBesideFluxAndTouchesNothingOfIts(t *testing.T) {
	env := fluxCluster(t)
	before := fluxState(t, env.Client)
	if len(before) < 12 {
		t.Fatalf("the Flux cluster holds %d CRDs and objects, want Flux's 11 CRDs and 5 objects: %v", len(before), before)
	}
	out, err := testenv.Helm(t, append([]string{"install", "strata", filepath.Join(testenv.RepoRoot(), "charts", "strata"),
		"--kubeconfig", env.KubeconfigFile(t), "--namespace", "strata-system", "--create-namespace"},
		setFlags(append(required, "engine.enabled=false"))...)...)
	if err != nil {
		t.Fatalf("helm install storage-only: %v\n%s", err, out)
	}
	var lvmCRD apiextensionsv1.CustomResourceDefinition
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "lvmclusters.storage.strata.dev"}, &lvmCRD); err != nil {
		t.Fatalf("strata's own CRDs were not installed: %v", err)
	}
	// The controller as the chart runs it, storage-only, against that
	// cluster: it serves strata's kinds (an LVMCluster's StorageClass
	// appears) and leaves Flux's as they were.
	o := manager.Defaults()
	o.Engine, o.MetricsAddr, o.HealthProbeAddr, o.SkipNameValidation = false, "0", "0", true
	o.ArtifactDir = t.TempDir()
	testenv.RunManagerFrom(t, func(ctx context.Context) (testenv.Manager, error) { return manager.New(ctx, env.Config, o) })
	ns := testenv.Namespace(t, env.Client, "storage")
	class := "beside-flux"
	lvm := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{Name: class}}}}}
	if err := env.Client.Create(context.Background(), lvm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Name: storagev1alpha1.StorageClassName(class)}, &storagev1.StorageClass{})
	})
	after := fluxState(t, env.Client)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: resource version %s, then %s", k, v, after[k])
		}
	}
	if len(after) != len(before) {
		t.Errorf("Flux's state grew from %d to %d entries", len(before), len(after))
	}
}

// With the engine on, the chart refuses to install where Flux's
// kustomize-controller runs, naming it and both ways out; sharded, it
// installs.
func TestTheEngineRefusesToInstallBesideFluxUnlessSharded(t *testing.T) {
	env := fluxCluster(t)
	install := func(extra ...string) ([]byte, error) {
		return testenv.Helm(t, append([]string{"install", "strata", filepath.Join(testenv.RepoRoot(), "charts", "strata"),
			"--kubeconfig", env.KubeconfigFile(t), "--namespace", "strata-system", "--create-namespace", "--dry-run=server"},
			setFlags(append(required, extra...))...)...)
	}
	_, err := install()
	if err == nil || !strings.Contains(err.Error(), "flux-system/kustomize-controller") || !strings.Contains(err.Error(), "engine.enabled=false") ||
		!strings.Contains(err.Error(), "watchLabelSelector") {
		t.Fatalf("helm install with the engine beside Flux: %v; want a refusal naming the Deployment and both ways out", err)
	}
	if out, err := install("controller.watchLabelSelector=sharding.fluxcd.io/key=strata"); err != nil {
		t.Fatalf("helm install sharded: %v\n%s", err, out)
	}
}

func setFlags(set []string) []string {
	var flags []string
	for _, s := range set {
		flags = append(flags, "--set", s)
	}
	return flags
}

// The chart's webhook configuration is the one reconciler/guardwebhook
// describes and its tests run against Flux: the same rules, the same
// users; the controller serves it on the port the Service names.
func TestTheGuardWebhookIsRenderedAsItsPackageDescribes(t *testing.T) {
	objects := testenv.RenderChart(t, "strata", "strata-system", append(required, "engine.enabled=false")...)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	u := find(t, objects, "ValidatingWebhookConfiguration", "strata-guard-flux-prunes")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vwc); err != nil {
		t.Fatal(err)
	}
	want := guardwebhook.Configuration("", admissionregistrationv1.WebhookClientConfig{}, guardwebhook.DefaultUsers, guardwebhook.DefaultGarbageCollectors).Webhooks[0]
	got := vwc.Webhooks[0]
	if !equality.Semantic.DeepEqual(got.Rules, want.Rules) || !equality.Semantic.DeepEqual(got.MatchConditions, want.MatchConditions) ||
		*got.FailurePolicy != *want.FailurePolicy || got.Name != want.Name {
		t.Fatalf("the chart's webhook:\n%+v\nthe package's:\n%+v", got, want)
	}
	if got.ClientConfig.Service == nil || *got.ClientConfig.Service.Path != guardwebhook.Path || len(got.ClientConfig.CABundle) == 0 {
		t.Fatalf("client config %+v", got.ClientConfig)
	}
	args := containerArgs(t, find(t, objects, "Deployment", "strata-controller"), "controller")
	if flag(args, "--guard-webhook-port") != "9443" || flag(args, "--engine") != "false" {
		t.Fatalf("controller args %v", args)
	}
	// With the engine on there is no webhook: strata's own prunes pass its
	// engine's guard.
	for _, o := range testenv.RenderChart(t, "strata", "strata-system", required...) {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			t.Fatalf("rendered %s with the engine on", o.GetName())
		}
	}
}

// The node agents post their events where the controller's go: the
// controller's alerts endpoint (its Service's events port) with the
// engine, Flux's notification-controller when controller.eventsAddr names
// it, nowhere in storage-only mode without it.
func TestTheAgentsEventsGoWhereTheControllers(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{nil, "http://strata-controller.strata-system.svc:9690/"},
		{[]string{"engine.enabled=false"}, ""},
		{[]string{"engine.enabled=false", "controller.eventsAddr=http://notification-controller.flux-system.svc.cluster.local./"},
			"http://notification-controller.flux-system.svc.cluster.local./"},
	} {
		objects := testenv.RenderChart(t, "strata", "strata-system", append(append([]string{}, required...), c.set...)...)
		if got := flag(containerArgs(t, find(t, objects, "DaemonSet", "strata-agent"), "agent"), "--events-addr"); got != c.want {
			t.Errorf("--set %v: the agent's --events-addr %q, want %q", c.set, got, c.want)
		}
	}
	host := find(t, testenv.RenderChart(t, "strata", "strata-system", everything...), "DaemonSet", "strata-btrfs-host")
	if got := flag(containerArgs(t, host, "agent"), "--events-addr"); got != "http://strata-controller.strata-system.svc:9690/" {
		t.Errorf("the btrfs host's --events-addr %q", got)
	}
	svc := find(t, testenv.RenderChart(t, "strata", "strata-system", required...), "Service", "strata-controller")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if !strings.Contains(fmt.Sprint(ports), "port:9690") {
		t.Errorf("the controller's Service does not serve the events port 9690: %v", ports)
	}
}
