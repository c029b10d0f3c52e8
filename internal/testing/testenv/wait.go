package testenv

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fluxcd/pkg/apis/meta"

	"github.com/strata-gitops/strata/internal/scheme"
)

// Eventually polls check until it returns nil, failing the test with the
// last error when the deadline passes. Tests synchronise only this way.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunManager starts a controller manager against the env with whatever
// setup registers, and stops it when the test ends. It returns a function
// that stops it earlier, for restart tests.
func RunManager(t testing.TB, env *Env, setup func(mgr manager.Manager) error) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ManagerOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	return RunManagerFrom(t, func(context.Context) (Manager, error) { return mgr, nil })
}

// ManagerOptions are the options of a test's manager: strata's scheme, no
// metrics or probe listeners, and controllers that may share a name with
// those of other managers in the process.
func ManagerOptions() manager.Options {
	return manager.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests start several managers in one process, each naming its
		// controllers the same way.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
}

// Manager is what RunManagerFrom starts.
type Manager interface {
	Start(ctx context.Context) error
}

// RunManagerFrom starts the manager build returns (given the run's
// context), stopping it when the test ends or when stop is called.
func RunManagerFrom(t testing.TB, build func(ctx context.Context) (Manager, error)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := build(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// Update applies mutate to the latest obj and updates it, again on a
// conflict: a controller under test may write the object in between.
func Update[T client.Object](t testing.TB, c client.Client, obj T, mutate func(T)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// RequestReconcile sets reconcile.fluxcd.io/requestedAt on obj, as `flux
// reconcile` does, and returns the value set.
func RequestReconcile(t testing.TB, c client.Client, obj client.Object) string {
	t.Helper()
	at := time.Now().Format(time.RFC3339Nano)
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[meta.ReconcileRequestAnnotation] = at
	obj.SetAnnotations(ann)
	if err := c.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
	return at
}
