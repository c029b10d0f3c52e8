package guardwebhook_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/guard"
)

func pvcYAML(ns, name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %s
  namespace: %s
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
`, name, ns)
}

func configMapYAML(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %s\ndata:\n  a: b\n", ns)
}

// Flux's real kustomize-controller (v1.9.4) and source-controller apply a
// repository holding a claim; a rename of the claim, then its removal,
// has Flux prune the old claims: the webhook refuses both deletes, the
// claims stay, and the Kustomization's status says why, in the engine's
// words.
func TestFluxsPrunesOfClaimsAreRefused(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, fmt.Sprintf("flux-prune-%d", os.Getpid()))
	serve(t, env, ns)
	selector := "strata.dev/test=" + ns
	testenv.FluxSourceController(t, env, selector)
	testenv.FluxKustomizeController(t, env)

	repo := testenv.NewGitServer(t).NewRepo(t, "cluster")
	rev := repo.CommitAndPush("a claim", map[string]string{"apps/pvc.yaml": pvcYAML(ns, "data"), "apps/cm.yaml": configMapYAML(ns)})
	create(t, env.Client,
		&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster", Labels: map[string]string{"strata.dev/test": ns}},
			Spec: sourcev1.GitRepositorySpec{URL: repo.URL, Interval: metav1.Duration{Duration: time.Second},
				Reference: &sourcev1.GitRepositoryRef{Branch: "main"}}},
		&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Minute}, Path: "./apps", Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster"}}})
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"}}
	waitKustomization(t, env.Client, ks, func(c *metav1.Condition) error {
		if c.Status != metav1.ConditionTrue || !strings.HasSuffix(ks.Status.LastAppliedRevision, rev) {
			return fmt.Errorf("Ready %s %q, applied %q", c.Status, c.Message, ks.Status.LastAppliedRevision)
		}
		return nil
	})

	for _, step := range []struct {
		what   string
		files  map[string]string
		refuse string // the claim whose deletion is refused
	}{
		{"rename the claim", map[string]string{"apps/pvc.yaml": pvcYAML(ns, "data-v2"), "apps/cm.yaml": configMapYAML(ns)}, "data"},
		{"delete the claim", map[string]string{"apps/cm.yaml": configMapYAML(ns)}, "data-v2"},
	} {
		repo.Remove("apps/pvc.yaml")
		rev = repo.CommitAndPush(step.what, step.files)
		want := fmt.Sprintf("deletion of PersistentVolumeClaim/%s/%s blocked: PersistentVolumeClaim holds data", ns, step.refuse)
		waitKustomization(t, env.Client, ks, func(c *metav1.Condition) error {
			if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) || !strings.Contains(c.Message, guard.OptInAnnotation) ||
				!strings.HasSuffix(ks.Status.LastAttemptedRevision, rev) {
				return fmt.Errorf("after %q: Ready %s %q", step.what, c.Status, c.Message)
			}
			return nil
		})
		for _, name := range []string{"data", step.refuse} {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil || pvc.DeletionTimestamp != nil {
				t.Fatalf("after %q, claim %s: %v, deleting since %v", step.what, name, err, pvc.DeletionTimestamp)
			}
		}
	}
}

// waitKustomization waits until check passes on the Kustomization's Ready
// condition.
func waitKustomization(t *testing.T, c client.Client, ks *kustomizev1.Kustomization, check func(*metav1.Condition) error) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ks), ks); err != nil {
			return err
		}
		ready := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
		if ready == nil {
			return fmt.Errorf("no Ready condition yet")
		}
		return check(ready)
	})
}
