package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

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
	agents   func(manager.Manager) replication.Agents
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
	w.agents = func(mgr manager.Manager) replication.Agents {
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
	w.stop = testenv.RunManager(t, testenv.Get(t), func(mgr manager.Manager) error {
		agents := w.agents(mgr)
		if err := volsynctest.SetUpReplication(mgr, agents); err != nil {
			return err
		}
		return (&controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Agents: agents, LeaseNamespace: w.ns,
			SelfFenceAfter: selfFenceAfter, Events: mgr.GetEventRecorder("strata-failover"), Now: time.Now}).SetupWithManager(mgr)
	})
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

// A lost node's app comes back on the backup with the last synced data;
// when the node is back, failback sends only what changed meanwhile and
// the old primary's unsynced writes are never served.
func TestALostNodeFailsOverAndBack(t *testing.T) {
	w := newWorld(t, selfFenceAfter)
	synced := w.a.Write(t, "db", "synced", 4*mib)
	w.app(t)
	w.a.Write(t, "db", "after-sync", 1*mib) // never replicated: lost with the node
	w.failover(t, failoverv1alpha1.FencingAgentSelfFence)
	w.wantFailover(t, readyAs("Protected"))

	lost := time.Now()
	w.beats[w.node("a")]() // node a's agent stops renewing its Lease
	w.runDeployment(t, "db-backup")
	fo := w.wantFailover(t, readyAs("FailedOver"))

	ts := fo.Status.Timestamps
	if fo.Status.Active != failoverv1alpha1.ActiveBackup || ts.Detected == nil || ts.Fenced == nil || ts.Promoted == nil || ts.Started == nil ||
		fo.Status.DataAgeAtPromotion == nil || !strings.Contains(fo.Status.FencedBy, "AgentSelfFence fenced node "+w.node("a")) {
		t.Fatalf("status after the failover: %+v", fo.Status)
	}
	t.Logf("lost at %s; detected +%s, fenced +%s, promoted +%s, started +%s", lost.Format(time.StampMilli),
		ts.Detected.Sub(lost), ts.Fenced.Sub(lost), ts.Promoted.Sub(lost), ts.Started.Sub(lost))
	// Fencing waits for the agent's self-fence deadline after its last
	// renewal, which was at most a renewal period before it was lost.
	if fenced := ts.Fenced.Sub(lost); fenced < selfFenceAfter-250*time.Millisecond {
		t.Fatalf("fenced %s after the last renewal, before the agent's self-fence deadline %s", fenced, selfFenceAfter)
	}
	wantServes(t, w.b, "db-backup", map[string][]byte{"synced": synced}, "after-sync")
	w.wantSourceStopped(t)

	// Node a comes back; a person asks for the failback.
	during := w.b.Write(t, "db-backup", "during", 2*mib)
	w.beat(t, w.node("a"))
	w.annotate(t, controller.AnnotationFailback, "true")
	w.runDeployment(t, "db")
	fo = w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.FailedBack == nil {
			return fmt.Errorf("status %+v", fo.Status)
		}
		return readyAs("Protected")(fo)
	})
	t.Logf("failback sent %d stream bytes after 2 MiB changed on the backup", fo.Status.FailbackStreamBytes)
	if fo.Status.FailbackStreamBytes < 2*mib || fo.Status.FailbackStreamBytes > 3*mib {
		t.Fatalf("failback sent %d stream bytes; want only the 2 MiB written on the backup", fo.Status.FailbackStreamBytes)
	}
	// Not what it wrote after its last sync, which the app on the backup
	// never saw.
	wantServes(t, w.a, "db", map[string][]byte{"synced": synced, "during": during}, "after-sync")
	// Replication runs forward again, from the replica both now hold.
	volsynctest.SetManual(t, w.c, w.ns, "db", "two")
	st := volsynctest.Synced(t, w.c, w.ns, "db", "two")
	if st.LatestMoverStatus == nil || !strings.Contains(st.LatestMoverStatus.Logs, "changes since replica") {
		t.Fatalf("the first sync after failback: %+v, want an incremental one", st.LatestMoverStatus)
	}
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

func TestManualFencingWaitsForAPerson(t *testing.T) {
	w := protectedThenLost(t, failoverv1alpha1.FencingManual)
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReconcilingCondition)
		if fo.Status.Phase != failoverv1alpha1.PhaseFencing || c == nil || !strings.Contains(c.Message, controller.AnnotationFenced) {
			return fmt.Errorf("phase %s, Reconciling %+v", fo.Status.Phase, c)
		}
		return nil
	})
	fo := &failoverv1alpha1.Failover{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "app"}, fo); err != nil {
		t.Fatal(err)
	}
	if fo.Status.Active != failoverv1alpha1.ActivePrimary {
		t.Fatalf("promoted before a person confirmed the fence: %+v", fo.Status)
	}
	w.annotate(t, controller.AnnotationFenced, w.node("a"))
	w.runDeployment(t, "db-backup")
	fo = w.wantFailover(t, readyAs("FailedOver"))
	if fo.Status.FencedBy != "Manual fenced node "+w.node("a") {
		t.Fatalf("fencedBy %q", fo.Status.FencedBy)
	}
}

func TestOutOfServiceTaintFencesTheNode(t *testing.T) {
	w := protectedThenLost(t, failoverv1alpha1.FencingOutOfServiceTaint)
	w.runDeployment(t, "db-backup")
	w.wantFailover(t, readyAs("FailedOver"))
	n := &corev1.Node{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: w.node("a")}, n); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
		t.Fatalf("node a's taints: %+v, want the out-of-service taint", n.Spec.Taints)
	}
}

// A node back before it is fenced calls the failover off, and what its
// agent fenced is made writable again.
func TestANodeBackInTimeIsNotFailedOver(t *testing.T) {
	w := protectedThenLost(t, failoverv1alpha1.FencingManual)
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		if fo.Status.Phase != failoverv1alpha1.PhaseFencing {
			return fmt.Errorf("phase %s", fo.Status.Phase)
		}
		return nil
	})
	// Its agent fenced itself meanwhile, as it does after its deadline.
	if _, err := w.a.Store.FencePairs(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.beat(t, w.node("a"))
	fo := w.wantFailover(t, readyAs("Protected"))
	if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.Promoted != nil {
		t.Fatalf("status after the node came back: %+v", fo.Status)
	}
	testenv.Eventually(t, timeout, func() error {
		if p, err := w.a.Store.GetPair(btrfsagent.Tenant, w.ns+".db-backup"); err != nil || p.Fenced {
			return fmt.Errorf("the primary's pair is %+v, %v; want it unfenced", p, err)
		}
		return nil
	})
}

// A Failover whose workload uses neither claim, or whose backup is
// smaller, is refused and changes nothing.
// After a whole cluster was down every Lease is old: a controller that
// starts then gives the primary's agent unreachableAfter to renew before
// it takes the node for lost, rather than failing over at once.
func TestAControllerStartedAfterAnOutageWaitsForRenewals(t *testing.T) {
	w := protectedThenLost(t, failoverv1alpha1.FencingAgentSelfFence)
	w.stop()
	l := &coordinationv1.Lease{}
	ctx := context.Background()
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: lease.Name(w.node("a"))}, l); err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-time.Hour)} // the cluster was down an hour
	if err := w.c.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	w.run(t, selfFenceAfter)
	fo := w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		if fo.Status.Timestamps.Detected == nil {
			return fmt.Errorf("not detected yet: %s", fo.Status.Phase)
		}
		return nil
	})
	if waited := fo.Status.Timestamps.Detected.Sub(restarted); waited < time.Second {
		t.Fatalf("the restarted controller took node a for lost %s after it started, before its agent had unreachableAfter (1s) to renew", waited)
	}
}

func TestBadFailoversAreRefused(t *testing.T) {
	w := newWorld(t, selfFenceAfter)
	w.app(t)
	ctx := context.Background()
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "app"}, Spec: failoverv1alpha1.FailoverSpec{
		Workload:    failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "app"},
		Primary:     failoverv1alpha1.Side{Node: w.node("a"), Claim: "db"},
		Backup:      failoverv1alpha1.Side{Node: w.node("a"), Claim: "db-backup"},
		Replication: failoverv1alpha1.ReplicationReference{Source: "db", Destination: "db-backup"},
	}}
	if err := w.c.Create(ctx, fo); err == nil || !strings.Contains(err.Error(), "different nodes") {
		t.Fatalf("a pair on one node: %v, want the API server to refuse it", err)
	}
	fo.Spec.Backup.Node = w.node("b")
	fo.Spec.Workload.Name = "another-app"
	if err := w.c.Create(ctx, fo); err != nil {
		t.Fatal(err)
	}
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReadyCondition)
		if c == nil || c.Reason != "InvalidFailover" || !strings.Contains(c.Message, "Deployment "+w.ns+"/another-app") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}

// BenchmarkNodeLossToReady measures a failover with the default policy
// (unreachableAfter 15 s, AgentSelfFence) and strata controller's default
// safe time: how long after a node's agent last renewed its Lease the
// failover detected the loss, counted the node fenced, promoted the
// backup and saw the workload ready. The benchmark stands in for the
// Deployment controller and reports the pod ready as soon as the claim
// is switched, so a real pod's start is not in "ready". `make bench`
// runs it (root: real agents on loop btrfs).
func BenchmarkNodeLossToReady(b *testing.B) {
	for range b.N {
		w := newWorld(b, controller.DefaultSelfFenceAfter)
		w.app(b)
		w.failoverWith(b, failoverv1alpha1.Policy{})
		w.wantFailover(b, readyAs("Protected"))
		l := &coordinationv1.Lease{}
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: lease.Name(w.node("a"))}, l); err != nil {
			b.Fatal(err)
		}
		w.beats[w.node("a")]()
		// The last renewal, read after the heartbeat stopped.
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: lease.Name(w.node("a"))}, l); err != nil {
			b.Fatal(err)
		}
		last := l.Spec.RenewTime.Time
		w.runDeployment(b, "db-backup")
		fo := w.wantFailover(b, readyAs("FailedOver"))
		ts := fo.Status.Timestamps
		b.ReportMetric(ts.Detected.Sub(last).Seconds(), "detect-s")
		b.ReportMetric(ts.Fenced.Sub(last).Seconds(), "fence-s")
		b.ReportMetric(ts.Promoted.Sub(last).Seconds(), "promote-s")
		b.ReportMetric(ts.Started.Sub(last).Seconds(), "ready-s")
	}
}
