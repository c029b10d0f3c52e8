package up_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// checkOtherSources checks the example repository's OCIRepository and
// Bucket are Ready and what each holds is applied.
func checkOtherSources(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "flux-system", Name: "homelab-settings"}
	for _, src := range []interface {
		client.Object
		GetConditions() []metav1.Condition
	}{&sourcev1.OCIRepository{}, &sourcev1.Bucket{}} {
		if err := c.Get(ctx, key, src); err != nil {
			t.Fatal(err)
		}
		if ready := apimeta.FindStatusCondition(src.GetConditions(), meta.ReadyCondition); ready == nil || ready.Status != metav1.ConditionTrue {
			t.Errorf("%T %s is not Ready: %+v", src, key, src.GetConditions())
		}
	}
	for _, name := range []string{"settings-from-oci", "settings-from-bucket"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("ConfigMap apps/%s, from the example's other sources: %v", name, err)
		}
	}
}

// checkNoPlaintext reads every event, every Flux object's status and
// every log line of strata's pods and of strata up itself, and fails if
// any holds the decrypted value of the example's SOPS-encrypted Secret.
func checkNoPlaintext(t *testing.T, r *upRun, plaintext string) {
	t.Helper()
	kubectl := func(args ...string) string {
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "k8s", "kubectl"),
			append([]string{"--kubeconfig", r.kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	read := map[string]string{
		"events": kubectl("get", "events", "-A", "-o", "yaml"),
		"Flux objects": kubectl("get", "kustomizations.kustomize.toolkit.fluxcd.io,gitrepositories,ocirepositories,buckets,receivers",
			"-A", "-o", "yaml"),
		"strata up's output": r.out.String(),
	}
	pods := kubectl("get", "pods", "-n", "strata-system", "-o", "jsonpath={.items[*].metadata.name}")
	for _, pod := range strings.Fields(pods) {
		read["logs of "+pod] = kubectl("logs", "-n", "strata-system", pod, "--all-containers")
	}
	if len(read) < 5 {
		t.Fatalf("read only %d sources of text; want strata's pods' logs too", len(read))
	}
	for what, text := range read {
		if strings.Contains(text, plaintext) {
			t.Errorf("%s holds the decrypted value of apps/notes-credentials", what)
		}
	}
	// The grep proves something only if what it read is the real thing.
	if !strings.Contains(read["Flux objects"], "name: apps") || !strings.Contains(read["events"], "kind: Event") {
		t.Fatalf("the objects or events read are not the cluster's (%d and %d bytes)", len(read["Flux objects"]), len(read["events"]))
	}
}
