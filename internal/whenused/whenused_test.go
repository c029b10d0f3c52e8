package whenused

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// Setup holds the feature's controllers back while the cluster holds no
// object of its kinds, and starts them when the first one is created.
func TestSetupStartsTheControllersWithTheFirstObject(t *testing.T) {
	env := testenv.Get(t)
	var created atomic.Bool
	started := make(chan struct{})
	var mgr manager.Manager
	testenv.RunManager(t, env, func(m manager.Manager) error {
		mgr = m
		return Setup(m, "failover", []client.Object{&failoverv1alpha1.Failover{}}, func() error {
			if !created.Load() {
				t.Error("the controllers started though the cluster held no Failover")
			}
			close(started)
			return nil
		})
	})
	waitUntilRunning(t, mgr)
	created.Store(true)
	createFailover(t, env, "first")
	waitStarted(t, started, "the first Failover")
}

// An object that exists when the process starts starts them at once.
func TestSetupStartsAtOnceWhenAnObjectExists(t *testing.T) {
	env := testenv.Get(t)
	createFailover(t, env, "existing")
	started := make(chan struct{})
	testenv.RunManager(t, env, func(m manager.Manager) error {
		return Setup(m, "failover", []client.Object{&failoverv1alpha1.Failover{}}, func() error {
			close(started)
			return nil
		})
	})
	waitStarted(t, started, "an existing Failover")
}

func waitStarted(t *testing.T, started <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal(what + " did not start the controllers within 30 s")
	}
}

// A kind the cluster does not serve stops the manager with what to check,
// instead of waiting for ever.
func TestAKindNotServedSaysWhatToCheck(t *testing.T) {
	env := testenv.Get(t)
	mgr, err := ctrl.NewManager(env.Config, testenv.ManagerOptions())
	if err != nil {
		t.Fatal(err)
	}
	missing := &unstructured.Unstructured{}
	missing.SetGroupVersionKind(schema.GroupVersionKind{Group: "nowhere.strata.dev", Version: "v1", Kind: "Nothing"})
	if err := Setup(mgr, "Nothing", []client.Object{missing}, func() error { return errors.New("started") }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = mgr.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "the Nothing controllers start with the first object of their kinds") ||
		!strings.Contains(err.Error(), "check that the cluster serves the kind") {
		t.Fatalf("manager stopped with %v, want the feature named and what to check", err)
	}
}

// A manager stopped while the feature's kinds are still being listed
// stops cleanly: no error says that watching them failed.
func TestStoppingWhileListingIsNoFailure(t *testing.T) {
	env := testenv.Get(t)
	var mu sync.Mutex
	var errorsLogged []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		errorsLogged = append(errorsLogged, args)
	}, funcr.Options{})
	// The kind is never listed: the manager's account may not list it.
	nobody := testenv.ServiceAccountConfig(env.Config, "default", "may-list-nothing")
	opts := testenv.ManagerOptions()
	opts.Logger = logger
	mgr, err := ctrl.NewManager(nobody, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, "Failover", []client.Object{&failoverv1alpha1.Failover{}}, func() error { return errors.New("started") }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not start within 30 s")
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Errorf("the manager stopped with %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, line := range errorsLogged {
		if strings.Contains(line, "start with the first object") {
			t.Errorf("a stop while listing was logged as a failure: %s", line)
		}
	}
}

// waitUntilRunning returns once the manager has started its runnables,
// Setup's among them, and its Failover informer has listed.
func waitUntilRunning(t *testing.T, mgr manager.Manager) {
	t.Helper()
	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not start within 30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := mgr.GetCache().GetInformer(ctx, &failoverv1alpha1.Failover{}); err != nil {
		t.Fatal(err)
	}
}

func createFailover(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: failoverv1alpha1.FailoverSpec{Workload: failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "app"},
			Primary: failoverv1alpha1.Side{Node: "a", Claim: "data-a"}, Backup: failoverv1alpha1.Side{Node: "b", Claim: "data-b"},
			Replication: failoverv1alpha1.ReplicationReference{Source: "data", Destination: "data"}}}
	if err := env.Client.Create(context.Background(), fo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), fo)
		testenv.Eventually(t, 30*time.Second, func() error {
			err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(fo), fo)
			if err == nil {
				return errors.New("Failover " + name + " is still there")
			}
			return client.IgnoreNotFound(err)
		})
	})
}
