package kustomization

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The controller is made without controller-runtime's For, which would
// name the Kustomization in every log line; the log queries users wrote
// for Flux's kustomize-controller must still find a reconcile's lines.
func TestReconcileLogLinesNameTheKustomization(t *testing.T) {
	var line string
	base := funcr.NewJSON(func(obj string) { line = obj }, funcr.Options{})
	logFor := requestLogger(base)

	logFor(&reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "apps", Name: "web"}}).Info("reconciled")
	for _, want := range []string{
		`"controller":"kustomization"`, `"controllerGroup":"kustomize.toolkit.fluxcd.io"`,
		`"controllerKind":"Kustomization"`, `"Kustomization":{"name":"web","namespace":"apps"}`,
		`"namespace":"apps"`, `"name":"web"`,
	} {
		if !strings.Contains(line, want) {
			t.Errorf("a reconcile's log line lacks %s: %s", want, line)
		}
	}

	logFor(nil).Info("starting")
	if !strings.Contains(line, `"controller":"kustomization"`) || strings.Contains(line, `"namespace"`) {
		t.Errorf("the controller's own log line: %s", line)
	}
}

// The controller as SetupWithManager registers it logs a reconcile with
// those fields: here controller-runtime's "Reconciler error" for a
// Kustomization the reconciler may not read.
func TestTheControllerLogsAReconcileWithItsKustomization(t *testing.T) {
	env := testenv.Get(t)
	var mu sync.Mutex
	var lines []string
	logger := funcr.NewJSON(func(obj string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, obj)
	}, funcr.Options{})
	ctx := context.Background()
	ks := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "logged"},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "none"}},
	}
	if err := env.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ks) })
	// Its reads are refused, so every reconcile fails at once.
	refused, err := client.New(testenv.ServiceAccountConfig(env.Config, "default", "may-read-nothing"), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManagerFrom(t, func(ctx context.Context) (testenv.Manager, error) {
		opts := testenv.ManagerOptions()
		opts.Logger = logger
		mgr, err := ctrl.NewManager(env.Config, opts)
		if err != nil {
			return nil, err
		}
		r := &Reconciler{Client: refused}
		return mgr, r.SetupWithManager(ctx, mgr, controller.Options{})
	})

	testenv.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, line := range lines {
			if !strings.Contains(line, `"msg":"Reconciler error"`) {
				continue
			}
			for _, want := range []string{`"controllerKind":"Kustomization"`, `"Kustomization":{"name":"logged","namespace":"default"}`,
				`"namespace":"default"`, `"name":"logged"`} {
				if !strings.Contains(line, want) {
					return fmt.Errorf("the reconcile's error line lacks %s: %s", want, line)
				}
			}
			return nil
		}
		return fmt.Errorf("no reconcile error logged yet (%d lines)", len(lines))
	})
}
