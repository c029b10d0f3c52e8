package controller_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
)

// TestMain lets every phase test (TestPhases*) run at once unless -parallel
// says otherwise: they wait on Leases and polls, not on the CPU, and two at
// a time (GOMAXPROCS on a 2-core machine) would triple their wall time.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(testenv.Main(m))
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
		if p, err := w.a.Store.GetPair(context.Background(), btrfsagent.Tenant, w.ns+".db-backup"); err != nil || p.Fenced {
			return fmt.Errorf("the primary's pair is %+v, %v; want it unfenced", p, err)
		}
		return nil
	})
}

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

// A Failover whose workload uses neither claim, or whose backup is
// smaller, is refused and changes nothing.
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
