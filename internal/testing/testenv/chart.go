package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RenderChart renders charts/strata with `helm template` (bin/helm, which
// `make test` installs) as release name in namespace, with --set values.
func RenderChart(t testing.TB, name, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	return RenderChartServing(t, name, namespace, nil, set...)
}

// RenderChartServing is RenderChart for a cluster that also serves the
// given APIs (Helm's --api-versions, "group/version/Kind"), as a cluster
// Helm installs into reports them.
func RenderChartServing(t testing.TB, name, namespace string, apis []string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", name, filepath.Join(RepoRoot(), "charts", "strata"), "--namespace", namespace}
	for _, api := range apis {
		args = append(args, "--api-versions", api)
	}
	out, err := Helm(t, append(args, setFlags(set)...)...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objects, err := ssautils.ReadObjects(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("reading the rendered chart: %v", err)
	}
	return objects
}

// Helm runs bin/helm and returns its standard output; a failure's error
// holds its standard error.
func Helm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	helm := filepath.Join(RepoRoot(), "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		Unavailable(t, "bin/helm is not installed (make test installs it through hack/tools.sh)")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

func setFlags(set []string) []string {
	var flags []string
	for _, s := range set {
		flags = append(flags, "--set", s)
	}
	return flags
}

// ApplyStrictly server-side applies the objects. Server-side apply checks
// each object against its schema, so a misspelt or misplaced field fails.
func ApplyStrictly(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) error {
	for _, o := range objects {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("strata-test"), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// ServiceAccountConfig is cfg acting as the service account.
func ServiceAccountConfig(cfg *rest.Config, namespace, name string) *rest.Config {
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return sa
}

// FinalizerPolicyServes returns nil once the API server adds finalizer to
// a Kustomization created in ns, as the chart's MutatingAdmissionPolicy
// does from the time the API server has seen it; it tries with a dry run.
func FinalizerPolicyServes(ctx context.Context, c client.Client, ns, finalizer string) error {
	probe := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "finalizer-policy-probe"},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour},
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "probe"}},
	}
	if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
		return err
	}
	if !slices.Contains(probe.Finalizers, finalizer) {
		return fmt.Errorf("a Kustomization created in %s gets finalizers %v, not %s", ns, probe.Finalizers, finalizer)
	}
	return nil
}
