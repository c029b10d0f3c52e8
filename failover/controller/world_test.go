package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
)

const (
	mib     = 1 << 20
	timeout = time.Minute
	// selfFenceAfter is the tests' safe time: short, so they run fast.
	selfFenceAfter = 1500 * time.Millisecond
	// agentFenceAfter is what the tests' agents publish: surely fenced
	// (lease.FencedBy) within selfFenceAfter.
	agentFenceAfter = 800 * time.Millisecond
)

var counter atomic.Int32

// world is an API server running the replication and failover
// reconcilers, two nodes' agents, their Leases, and an app "app" on
// claim db (node-a) paired with db-backup (node-b).
type world struct {
	c     client.Client
	ns    string
	a, b  btrfsagent.Agent
	beats map[string]context.CancelFunc
	// provider is the pair's mover; agents how the controllers reach
	// the agents.
	provider string
	agents   func(manager.Manager) mover.Agents
	// stop stops the running controllers.
	stop func()
}

// emptyWorld is the world's namespace, with no agents yet.
func emptyWorld(t testing.TB) *world {
	t.Helper()
	w := &world{c: testenv.Get(t).Client, ns: fmt.Sprintf("fo-%d-%d", os.Getpid(), counter.Add(1)), beats: map[string]context.CancelFunc{}}
	if err := w.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
		t.Fatal(err)
	}
	return w
}

func newWorld(t testing.TB, selfFenceAfter time.Duration) *world {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on loop devices")
	ctx := context.Background()
	w := emptyWorld(t)
	w.provider = volsyncv1alpha1.ProviderBtrfs
	w.agents = func(mgr manager.Manager) mover.Agents {
		return btrfsbackend.New(mgr.GetClient(), mgr.GetAPIReader(), 30*time.Second)
	}
	w.a, w.b = btrfsagent.Start(t, w.c, w.ns, "a"), btrfsagent.Start(t, w.c, w.ns, "b")
	for _, n := range []string{w.node("a"), w.node("b")} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := w.c.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.c.Delete(context.Background(), node) })
		w.beat(t, n)
	}
	w.a.Claim(t, w.c, w.ns, "db", w.node("a"))
	w.b.Claim(t, w.c, w.ns, "db-backup", w.node("b"))
	w.run(t, selfFenceAfter)
	return w
}

// run starts the replication and failover controllers.
func (w *world) run(t testing.TB, selfFenceAfter time.Duration) {
	w.stop = testenv.RunManager(t, testenv.Get(t), w.controllers(selfFenceAfter))
}

// controllers sets the replication and failover controllers up on a
// manager.
func (w *world) controllers(selfFenceAfter time.Duration) func(mgr manager.Manager) error {
	return func(mgr manager.Manager) error {
		agents := w.agents(mgr)
		if err := volsynctest.SetUpReplication(mgr, agents); err != nil {
			return err
		}
		return (&controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Agents: agents, LeaseNamespace: w.ns,
			SelfFenceAfter: selfFenceAfter, Events: mgr.GetEventRecorder("strata-failover"), Now: time.Now}).SetupWithManager(mgr)
	}
}

// node names the test's nodes apart from other tests' in the same API
// server.
func (w *world) node(n string) string { return w.ns + "-" + n }

// beat renews the node's Lease, as its agent does, until stop; the
// agent says it fences agentFenceAfter after a renewal.
func (w *world) beat(t testing.TB, node string) { w.beatFencing(t, node, agentFenceAfter) }

// beatFencing is beat by an agent that fences after the given time; 0
// never fences.
func (w *world) beatFencing(t testing.TB, node string, after time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	w.beats[node] = cancel
	t.Cleanup(cancel)
	h := &lease.Heartbeat{Client: w.c, Namespace: w.ns, Node: node, Period: 200 * time.Millisecond, SelfFenceAfter: after}
	go func() { _ = h.Start(ctx) }()
}

// kubelet renews the node's own Lease in kube-node-lease, as a living
// kubelet does, until the returned stop.
func (w *world) kubelet(t testing.TB, node string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node}}
	_ = w.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}})
	if err := w.c.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), l) })
	go func() {
		for {
			patch := client.MergeFrom(l.DeepCopy())
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_ = w.c.Patch(ctx, l, patch)
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return cancel
}

// app makes the Deployment on claim db and the pair, and waits for the
// first sync.
func (w *world) app(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "app"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(1)),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app"}}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "example-app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db"}}}},
		}},
	}}
	if err := w.c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	volsynctest.Pair(t, w.c, w.provider, w.ns, "db", "db", "db-backup", "db-backup", "one")
	testenv.Eventually(t, timeout, func() error {
		rd := &volsyncv1alpha1.ReplicationDestination{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "db-backup"}, rd); err != nil {
			return err
		}
		if rd.Status == nil || rd.Status.LastSyncTime == nil {
			return fmt.Errorf("no replica at the destination yet: %+v", rd.Status)
		}
		return nil
	})
}

func (w *world) failover(t testing.TB, fencing failoverv1alpha1.FencingMode) {
	w.failoverWith(t, failoverv1alpha1.Policy{UnreachableAfter: metav1.Duration{Duration: time.Second}, Fencing: fencing})
}

// failoverWith creates the Failover of the app with a policy.
func (w *world) failoverWith(t testing.TB, policy failoverv1alpha1.Policy) {
	t.Helper()
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "app"}, Spec: failoverv1alpha1.FailoverSpec{
		Workload:    failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "app"},
		Primary:     failoverv1alpha1.Side{Node: w.node("a"), Claim: "db"},
		Backup:      failoverv1alpha1.Side{Node: w.node("b"), Claim: "db-backup"},
		Replication: failoverv1alpha1.ReplicationReference{Source: "db", Destination: "db-backup"},
		Policy:      policy,
	}}
	if err := w.c.Create(context.Background(), fo); err != nil {
		t.Fatal(err)
	}
}

// protectedThenLost runs the app protected by a Failover with the
// fencing mode, then stops node a's agent renewing its Lease.
func protectedThenLost(t testing.TB, fencing failoverv1alpha1.FencingMode) *world {
	t.Helper()
	w := newWorld(t, selfFenceAfter)
	w.app(t)
	w.failover(t, fencing)
	w.wantFailover(t, readyAs("Protected"))
	w.beats[w.node("a")]()
	return w
}

// wantFailover waits until the Failover's status passes check.
func (w *world) wantFailover(t testing.TB, check func(*failoverv1alpha1.Failover) error) *failoverv1alpha1.Failover {
	t.Helper()
	fo := &failoverv1alpha1.Failover{}
	testenv.Eventually(t, timeout, func() error {
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "app"}, fo); err != nil {
			return err
		}
		return check(fo)
	})
	return fo
}

func readyAs(reason string) func(*failoverv1alpha1.Failover) error {
	return func(fo *failoverv1alpha1.Failover) error {
		c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("phase %s, Ready %+v; want Ready %s", fo.Status.Phase, c, reason)
		}
		return nil
	}
}

// runDeployment plays the Deployment controller once the Failover has
// switched the app's claim: it reports the new pods ready, and plays the
// kubelet of the new pod.
func (w *world) runDeployment(t testing.TB, claim string) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, timeout, func() error {
		d := &appsv1.Deployment{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "app"}, d); err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName; got != claim {
			fo := &failoverv1alpha1.Failover{}
			_ = w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "app"}, fo)
			return fmt.Errorf("the app uses claim %s, want %s; the Failover's status is %+v", got, claim, fo.Status)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		if err := w.c.Status().Update(ctx, d); err != nil {
			return err
		}
		// And the kubelet: the old pods on another claim are gone, the
		// new pod on the claim is ready.
		pods := &corev1.PodList{}
		if err := w.c.List(ctx, pods, client.InNamespace(w.ns)); err != nil {
			return err
		}
		for i := range pods.Items {
			if pods.Items[i].Spec.Volumes[0].PersistentVolumeClaim.ClaimName != claim {
				if err := w.c.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, GenerateName: "app-", Labels: d.Spec.Template.Labels},
			Spec: d.Spec.Template.Spec}
		if err := w.c.Create(ctx, pod); err != nil {
			return err
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return w.c.Status().Update(ctx, pod)
	})
}

func (w *world) annotate(t testing.TB, key, value string) {
	t.Helper()
	fo := &failoverv1alpha1.Failover{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "app"}, fo); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(fo.DeepCopy())
	if fo.Annotations == nil {
		fo.Annotations = map[string]string{}
	}
	fo.Annotations[key] = value
	if err := w.c.Patch(context.Background(), fo, patch); err != nil {
		t.Fatal(err)
	}
}

// wantServes checks that the agent's volume holds exactly these files'
// bytes, and not the absent file.
func wantServes(t testing.TB, agent btrfsagent.Agent, volume string, files map[string][]byte, absent string) {
	t.Helper()
	v, err := agent.Store.Get(btrfsagent.Tenant, volume)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range files {
		if got, err := os.ReadFile(filepath.Join(v.Path, file)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("volume %s's %s holds %d bytes (%v), want %d", volume, file, len(got), err, len(data))
		}
	}
	if _, err := os.Stat(filepath.Join(v.Path, absent)); err == nil {
		t.Fatalf("volume %s serves %s, which was never synced to it", volume, absent)
	}
}

// wantSourceStopped waits for the source to say it stopped syncing: the
// lost node's copy must not overwrite the replicas the backup came from.
func (w *world) wantSourceStopped(t testing.TB) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		rs := &volsyncv1alpha1.ReplicationSource{}
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "db"}, rs); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(rs.GetConditions(), volsyncv1alpha1.ConditionSynchronizing)
		if c == nil || !strings.Contains(c.Message, "stopped: Failover app") {
			return fmt.Errorf("source condition %+v", c)
		}
		return nil
	})
}
