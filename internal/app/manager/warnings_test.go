package manager

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The manager's clients log the API server's warnings, but not the one
// about Flux's finalizer name, which the server sends for every new
// Kustomization and no one running strata can act on. One write draws
// both: the same warning for another finalizer name is still logged.
func TestTheManagersClientLeavesOutOnlyTheFinalizerNameWarning(t *testing.T) {
	env := testenv.Get(t)
	o := Defaults()
	o.ArtifactDir, o.SkipNameValidation = t.TempDir(), true
	o.MetricsAddr, o.HealthProbeAddr, o.ArtifactAddr, o.ReceiverAddr = "0", "0", "0", "0"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := New(ctx, env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logged []string
	ctx = log.IntoContext(ctx, funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{}))

	const other = "example.com"
	ks := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "warned", Finalizers: []string{kustomization.Finalizer, other}},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "none"}},
	}
	if err := mgr.GetClient().Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ks.Finalizers = nil
		_ = mgr.GetClient().Update(context.Background(), ks)
		_ = mgr.GetClient().Delete(context.Background(), ks)
	})

	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(logged, "\n")
	if strings.Contains(all, `\"`+kustomization.Finalizer+`\"`) {
		t.Errorf("the warning about Flux's finalizer name was logged:\n%s", all)
	}
	if !strings.Contains(all, `\"`+other+`\": prefer a domain-qualified finalizer name`) {
		t.Errorf("the API server's warning about finalizer %q was not logged (the test's write must draw one):\n%s", other, all)
	}
}
