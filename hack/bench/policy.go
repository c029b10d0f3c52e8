package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// finalizerPolicy is the chart's MutatingAdmissionPolicy that has the API
// server add Flux's finalizer to new Kustomizations, and its binding, as
// bin/helm renders them for a cluster that serves them.
func (b *bench) finalizerPolicy() ([]*unstructured.Unstructured, error) {
	cmd := exec.Command(filepath.Join(b.root, "bin", "helm"), "template", "bench", filepath.Join(b.root, "charts", "strata"),
		"--show-only", "templates/flux-finalizer-policy.yaml",
		"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
		"--set", "image.repository=bench", "--set", "csiSidecars.registry=bench")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rendering the chart's finalizer policy (bin/helm: hack/tools.sh helm): %w: %s", err, stderr.Bytes())
	}
	return ssautils.ReadObjects(bytes.NewReader(out))
}

// installFinalizerPolicy applies the policy objects and waits until the
// API server adds the finalizer to what is created in ns.
func (b *bench) installFinalizerPolicy(objects []*unstructured.Unstructured, ns string) error {
	ctx := context.Background()
	for _, o := range objects {
		if err := b.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("bench")); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	err := poll(time.Minute, 50*time.Millisecond, func() error {
		return testenv.FinalizerPolicyServes(ctx, b.c, ns, kustomization.Finalizer)
	})
	if err != nil {
		return fmt.Errorf("the chart's finalizer policy, a minute after it was applied: %w", err)
	}
	return nil
}

// boundTo binds the policy only in namespaces with the label, so that
// creates with and without it can be measured side by side.
func boundTo(objects []*unstructured.Unstructured, label string) error {
	for _, o := range objects {
		if o.GetKind() == "MutatingAdmissionPolicyBinding" {
			return unstructured.SetNestedStringMap(o.Object, map[string]string{label: "on"},
				"spec", "matchResources", "namespaceSelector", "matchLabels")
		}
	}
	return fmt.Errorf("the chart renders no MutatingAdmissionPolicyBinding")
}
