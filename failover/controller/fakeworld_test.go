package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/testing/fakeagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/mover"
)

// The fake world's times: shorter than the real world's, as its agents
// answer at once; the agent still surely fences (lease.FencedBy) within
// the controller's wait.
const (
	fakeUnreachableAfter = 500 * time.Millisecond
	fakeSelfFenceAfter   = time.Second
	fakeAgentFenceAfter  = 400 * time.Millisecond
)

// fakeWorld is the world on fake agents (fakeagent: the in-memory
// backend behind the real node API): no root, and the controllers see
// only its namespace, so its tests run side by side. Each node's agent
// fences itself fakeAgentFenceAfter after its Lease's last renewal, as a
// real agent's self-fence does.
type fakeWorld struct {
	*world
	fa, fb *fakeagent.Node
	fake   *fakeagent.Agents
	cfg    *rest.Config
	// mu guards the world's stop, which a restart replaces.
	mu sync.Mutex
}

// primaryData is what the app on claim db holds when the test starts.
var primaryData = []byte("the ledger as of its first sync")

func newFakeWorld(t *testing.T) *fakeWorld {
	t.Helper()
	ctx := context.Background()
	w := &fakeWorld{world: emptyWorld(t), cfg: testenv.Get(t).Config}
	w.provider = volsyncv1alpha1.ProviderBtrfs
	w.fa, w.fb = fakeagent.Start(t, w.node("a")), fakeagent.Start(t, w.node("b"))
	w.fake = fakeagent.NewAgents(w.fa, w.fb)
	w.agents = func(manager.Manager) mover.Agents { return w.fake }
	for _, n := range []*fakeagent.Node{w.fa, w.fb} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		if err := w.c.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.c.Delete(context.Background(), node) })
		w.beatAndFence(t, n)
	}
	w.fa.Claim(t, w.c, w.ns, "db", primaryData)
	w.fb.Claim(t, w.c, w.ns, "db-backup", nil)
	w.runHere(t)
	return w
}

// runHere starts the controllers on a manager that caches only the
// world's namespace (and the kubelets' Leases), until the test ends.
func (w *fakeWorld) runHere(t *testing.T) {
	stop, err := w.startControllers(t)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.stop = stop
	w.mu.Unlock()
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stop()
	})
}

func (w *fakeWorld) startControllers(t *testing.T) (stop func(), err error) {
	opts := testenv.ManagerOptions()
	opts.Cache.DefaultNamespaces = map[string]cache.Config{w.ns: {}, corev1.NamespaceNodeLease: {}}
	mgr, err := ctrl.NewManager(w.cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := w.controllers(fakeSelfFenceAfter)(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("the controllers stopped: %v", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// restartOnEveryPhase restarts the controllers, as a crash and a new
// leader do, the first time the Failover is seen in each phase past
// Protected; it returns how many times, once told to stop. (Restarted
// on every change, a controller would never get past Unreachable: a
// new one waits unreachableAfter before it takes a node for lost.)
func (w *fakeWorld) restartOnEveryPhase(t *testing.T) (stop func() int) {
	seen := map[failoverv1alpha1.Phase]bool{failoverv1alpha1.PhaseProtected: true}
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			fo := &failoverv1alpha1.Failover{}
			if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "app"}, fo); err != nil || seen[fo.Status.Phase] {
				continue
			}
			seen[fo.Status.Phase] = true
			w.mu.Lock()
			w.stop()
			next, err := w.startControllers(t)
			if err != nil {
				t.Errorf("restarting the controllers: %v", err)
				next = func() {}
			}
			w.stop = next
			w.mu.Unlock()
		}
	}()
	return func() int {
		close(quit)
		<-stopped
		return len(seen) - 1
	}
}

// beatAndFence renews the node's Lease as its agent does, until
// w.beats[node] is called, and fences the agent's volumes once the Lease
// has gone fakeAgentFenceAfter unrenewed.
func (w *fakeWorld) beatAndFence(t *testing.T, n *fakeagent.Node) {
	fence := &lease.SelfFence{After: fakeAgentFenceAfter, Fence: func(ctx context.Context) error {
		_, err := n.Store.FencePairs(ctx)
		return err
	}}
	watch, stopWatch := context.WithCancel(context.Background())
	t.Cleanup(stopWatch)
	go func() { _ = fence.Start(watch) }()
	beat, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	w.beats[n.Name] = stop
	h := &lease.Heartbeat{Client: w.c, Namespace: w.ns, Node: n.Name, Period: 200 * time.Millisecond,
		SelfFenceAfter: fakeAgentFenceAfter, Renewed: fence.Renewed}
	go func() { _ = h.Start(beat) }()
}

// failoverOf creates the Failover of the app with the fencing mode, on
// the fake world's times.
func (w *fakeWorld) failoverOf(t *testing.T, fencing failoverv1alpha1.FencingMode, maxDataAge time.Duration) {
	w.failoverWith(t, failoverv1alpha1.Policy{UnreachableAfter: metav1.Duration{Duration: fakeUnreachableAfter},
		Fencing: fencing, MaxDataAge: metav1.Duration{Duration: maxDataAge}})
}

// lose takes node a away: its agent stops renewing its Lease and stops
// answering.
func (w *fakeWorld) lose() {
	w.beats[w.fa.Name]()
	w.fa.SetDown(true)
}

// comeBack brings node a back: its agent answers and renews again. It
// returns once the Lease is renewed, as a person asking for a failback
// sees the node back first.
func (w *fakeWorld) comeBack(t *testing.T) {
	t.Helper()
	back := time.Now()
	w.fa.SetDown(false)
	w.beatAndFence(t, w.fa)
	testenv.Eventually(t, timeout, func() error {
		l := &coordinationv1.Lease{}
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: lease.Name(w.fa.Name)}, l); err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || l.Spec.RenewTime.Before(&metav1.MicroTime{Time: back.Truncate(time.Microsecond)}) {
			return fmt.Errorf("node a's Lease was last renewed at %v, before it came back", l.Spec.RenewTime)
		}
		return nil
	})
}

// wantHolds checks what a fake agent's volume holds.
func wantHolds(t *testing.T, n *fakeagent.Node, volume string, want []byte) {
	t.Helper()
	got, err := n.Store.Read(fakeagent.Tenant, volume)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("volume %s on %s holds %q (%v), want %q", volume, n.Name, got, err, want)
	}
}

// wantFenced checks whether the fake agent's pair says it is fenced.
func (w *fakeWorld) wantFenced(t *testing.T, n *fakeagent.Node, fenced bool) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		p, err := n.Store.GetPair(context.Background(), fakeagent.Tenant, w.ns+".db-backup")
		if err != nil || p.Fenced != fenced {
			return fmt.Errorf("the pair on %s is %+v (%v), want fenced %v", n.Name, p, err, fenced)
		}
		return nil
	})
}
