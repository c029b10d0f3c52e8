package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
)

// The ledger app on a failover pair across the two nodes: node A's
// node-local btrfs claim replicated to node B's, with strata's own mover.
// Its writer appends numbered, timed lines; the lines on both sides show
// what each side held and that no two writers overlapped. One story, in
// the order a user meets it: a partition, a failback, a power loss.
func TestFailoverOnRealNodes(t *testing.T) {
	c, cl := start(t)
	l := newLedger(t, c, cl, "failover")
	l.syncKilledHalfway()
	first := l.sync("one", l.a)

	// A is cut off, its processes running on: its agent fences its
	// volume, and B serves the last replica.
	cut := time.Now()
	if err := l.a.Cut(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.a.Mend() })
	fo := l.waitPhase(failoverv1alpha1.PhaseFailedOver, failoverv1alpha1.ActiveBackup)
	ts := fo.Status.Timestamps
	t.Logf("partition: detected %s, promoted %s, started on B %s after the cut", ts.Detected.Sub(cut).Round(time.Millisecond),
		ts.Promoted.Sub(cut).Round(time.Millisecond), ts.Started.Sub(cut).Round(time.Millisecond))
	onB := l.serving(l.b, len(first)+5)
	if err := l.a.Mend(); err != nil {
		t.Fatal(err)
	}
	l.checkTakeover(first, onB, l.linesOnDisk(l.a))
	if !strings.Contains(fo.Status.FencedBy, string(failoverv1alpha1.FencingAgentSelfFence)) {
		t.Errorf("status.fencedBy %q does not name the agent's self-fence", fo.Status.FencedBy)
	}

	// Failback on request: only what B wrote goes back.
	lastOnB := l.serving(l.b, len(onB)+5)
	l.annotate(controller.AnnotationFailback, "true")
	fo = l.waitPhase(failoverv1alpha1.PhaseProtected, failoverv1alpha1.ActivePrimary)
	if fo.Status.FailbackStreamBytes <= 0 || fo.Status.FailbackStreamBytes >= ledgerBallast<<20/4 {
		t.Errorf("the failback sent %d stream bytes; B wrote a few KiB, and the volume holds %d MiB", fo.Status.FailbackStreamBytes, ledgerBallast)
	}
	back := l.serving(l.a, len(lastOnB)+5)
	if !isPrefix(lastOnB, back) {
		t.Fatalf("after the failback A holds %s, not every line B served before it (%s)", describe(back), describe(lastOnB))
	}

	// A's agent stops, as one out of memory or waiting for its new image
	// does, while A and its app live: no failover, and the app goes on
	// writing on A alone.
	l.agentDownOnALiveNode(back)

	// A loses power: B serves what the last sync sent, and an Alert on
	// the Failover tells a webhook on the host at the start and the end,
	// with the data age.
	hook := alertOnFailovers(t, l.cl, l.ns)
	page := watchTimeline(t, c, l.ns, "ledger")
	loss := l.losePower(c)
	if shown := page.shownAfter(t, loss.detectedAt); shown > 2*time.Second {
		t.Errorf("the dashboard showed the failover %s after the controller detected it; want within 2 s", shown)
	} else {
		t.Logf("the dashboard's failovers page showed the detection %s after it", shown)
	}
	hook.wantNotified(t, l.cl, l.ns, controller.ReasonFailoverStarted)
	done := hook.wantNotified(t, l.cl, l.ns, controller.ReasonFailoverCompleted)
	if age := done.event.Metadata["dataAge"]; age != loss.dataAge.String() {
		t.Errorf("FailoverCompleted's notification says data age %q, the Failover %s", age, loss.dataAge)
	}
	t.Logf("node loss to app on B, from A's last Lease renewal: detected %s, fenced %s, promoted %s, started %s, pod serving %s (data age %s)",
		loss.detect, loss.fence, loss.promote, loss.started, loss.serving, loss.dataAge)
}

// agentDownOnALiveNode freezes A's agent, which renews A's Lease and
// fences it, while A's kubelet and the app on A go on: the Failover
// stays fencing, saying the kubelet lives, B never starts the app, and
// A's writer keeps its sequence. Resumed, the agent renews again, and
// the app is protected on A.
func (l *ledger) agentDownOnALiveNode(before []line) {
	l.t.Helper()
	// Both of A's agents renew its Lease: the node agent and the btrfs
	// host.
	agents := l.processes(l.a, "strata-node", "agent")
	if len(agents) < 2 {
		l.t.Fatalf("found %d strata agents on %s, want the node agent and the btrfs host", len(agents), l.a.Name())
	}
	for _, pid := range agents {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			l.t.Fatal(err)
		}
	}
	resume := func() {
		for _, pid := range agents {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	l.t.Cleanup(resume)
	fo := &failoverv1alpha1.Failover{}
	testenv.Eventually(l.t, 2*time.Minute, func() error {
		if err := l.cl.Get(context.Background(), client.ObjectKey{Namespace: l.ns, Name: "ledger"}, fo); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReconcilingCondition)
		if c == nil || !strings.Contains(c.Message, "its kubelet renews") {
			return fmt.Errorf("Failover %s/ledger is %s; Reconciling %+v", l.ns, fo.Status.Phase, c)
		}
		return nil
	})
	if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.Promoted != nil {
		l.t.Fatalf("the backup was promoted while A's agent was down and A lived: %+v", fo.Status)
	}
	onA := l.serving(l.a, len(before)+5)
	if !isPrefix(before, onA) {
		l.t.Fatalf("while A's agent was down A holds %s, not every line it held before (%s)", describe(onA), describe(before))
	}
	resume()
	l.waitPhase(failoverv1alpha1.PhaseProtected, failoverv1alpha1.ActivePrimary)
	l.serving(l.a, len(onA)+5)
}

// Node loss to app serving on the backup, on the real nodes, from the
// primary's last Lease renewal: detect, fence, promote, the Deployment
// ready, and its pod answering. One loss: run with -benchtime 1x.
func BenchmarkNodeLossOnRealNodes(b *testing.B) {
	c, cl := start(b)
	l := newLedger(b, c, cl, "failover-bench")
	loss := l.losePower(c)
	for _, m := range []struct {
		d    time.Duration
		unit string
	}{{loss.detect, "detect-s"}, {loss.fence, "fence-s"}, {loss.promote, "promote-s"}, {loss.started, "ready-s"}, {loss.serving, "serving-s"}} {
		b.ReportMetric(m.d.Seconds(), m.unit)
	}
}

// nodeLoss is how long each step of a failover took after the primary's
// agent last renewed its Lease.
type nodeLoss struct {
	detect, fence, promote, started, serving, dataAge time.Duration
	// detectedAt is when the controller saw the loss.
	detectedAt time.Time
}

// losePower syncs the pair, stops node A hard and waits for B to serve
// every line A held before the sync; A starts again when the test ends.
func (l *ledger) losePower(c *cluster.Cluster) nodeLoss {
	l.t.Helper()
	synced := l.sync("before-power-loss", l.a)
	if err := l.a.Stop(); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() {
		if err := l.a.Start(context.Background()); err != nil {
			l.t.Error(err)
		}
		if err := c.WaitReady(context.Background(), 3*time.Minute); err != nil {
			l.t.Error(err)
		}
	})
	fo := l.waitPhase(failoverv1alpha1.PhaseFailedOver, failoverv1alpha1.ActiveBackup)
	after := l.serving(l.b, len(synced)+1)
	serving := time.Now()
	if !isPrefix(synced, after) {
		l.t.Fatalf("after A's power loss B holds %s, not every line A served before the last sync (%s)", describe(after), describe(synced))
	}
	renewal := &coordinationv1.Lease{}
	if err := l.cl.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: lease.Name(l.a.Name())}, renewal); err != nil {
		l.t.Fatal(err)
	}
	last, ts := renewal.Spec.RenewTime.Time, fo.Status.Timestamps
	return nodeLoss{detectedAt: ts.Detected.Time, detect: ts.Detected.Sub(last), fence: ts.Fenced.Sub(last), promote: ts.Promoted.Sub(last),
		started: ts.Started.Sub(last), serving: serving.Sub(last), dataAge: fo.Status.DataAgeAtPromotion.Duration}
}

// killedSyncMiB is what the killed sync has to send, over a link to the
// backup slowed to killedSyncMbit: seconds of stream, to be caught
// halfway.
const (
	killedSyncMiB  = 100
	killedSyncMbit = 200
)

// syncKilledHalfway writes a large file into the primary's volume and
// kills the backup's agent while it receives the sync: the half-received
// stream never becomes a replica, and the next sync, once the agent is
// back, carries the file whole and leaves nothing half received.
func (l *ledger) syncKilledHalfway() {
	l.t.Helper()
	l.sync("before-cut", l.a)
	kept, _ := l.newestReplica(l.b)
	volume := "$(dirname $(ls " + filepath.Join(btrfsHost.Base, btrfsHost.Tenant, "*", "data", "sequence") + "))"
	write := fmt.Sprintf("dd if=/dev/urandom of=%s/big bs=1M count=%d conv=fsync status=none && sha256sum < %s/big", volume, killedSyncMiB, volume)
	sum, err := l.a.Command("sh", "-c", write).Output()
	if err != nil {
		l.t.Fatalf("writing %d MiB into the ledger's volume on %s: %v", killedSyncMiB, l.a.Name(), err)
	}
	if err := l.b.Slow(killedSyncMbit); err != nil {
		l.t.Fatal(err)
	}
	defer func() { _ = l.b.Slow(0) }()
	volsynctest.SetManual(l.t, l.cl, l.ns, "ledger", "cut")
	receiving := l.waitProcess(l.b, "btrfs", "receive")
	agent := l.waitProcess(l.b, "agent", "--lvm=false")
	for _, pid := range []int{agent, receiving} {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := l.b.Slow(0); err != nil {
		l.t.Fatal(err)
	}
	// The source retries the sync once the agent is back, and the retry
	// may finish before anything here looks. What must hold is that the
	// killed stream never became a replica: every replica newer than the
	// kept one holds the whole file, and nothing half received is left.
	volsynctest.Synced(l.t, l.cl, l.ns, "ledger", "cut")
	out, err := l.b.Command("ls", "-a", l.pairDir()).Output()
	if err != nil || strings.Contains(string(out), ".part") || strings.Contains(string(out), ".new") {
		l.t.Fatalf("after the next sync %s holds (%v):\n%s\nwant nothing half received", l.b.Name(), err, out)
	}
	newer := 0
	for _, name := range strings.Fields(string(out)) {
		seq, err := strconv.Atoi(name)
		if err != nil || seq <= kept {
			continue
		}
		newer++
		got, err := l.b.Command("sh", "-c", fmt.Sprintf("sha256sum < %s/%d/data/big", l.pairDir(), seq)).Output()
		if err != nil || string(got) != string(sum) {
			l.t.Fatalf("replica %d on %s, newer than the kept %d, holds %q (%v), not the whole file (%s): the killed stream became a replica",
				seq, l.b.Name(), kept, got, err, sum)
		}
	}
	if newer == 0 {
		l.t.Fatalf("after the next sync %s has no replica newer than %d:\n%s", l.b.Name(), kept, out)
	}
}

// pairDir is the pair's directory of replicas on each side.
func (l *ledger) pairDir() string {
	return filepath.Join(btrfsHost.Base, btrfsHost.Tenant, ".pairs", l.ns+".ledger-backup")
}

// newestReplica is the number of node's newest complete replica of the
// pair, and how many ledger lines it holds.
func (l *ledger) newestReplica(node *kubenode.Node) (seq, lines int) {
	l.t.Helper()
	out, err := node.Command("ls", l.pairDir()).Output()
	if err != nil {
		l.t.Fatalf("listing %s on %s: %v", l.pairDir(), node.Name(), err)
	}
	for _, name := range strings.Fields(string(out)) {
		if n, err := strconv.Atoi(name); err == nil && n > seq {
			seq = n
		}
	}
	data, err := node.Command("cat", filepath.Join(l.pairDir(), strconv.Itoa(seq), "data", "sequence")).Output()
	if err != nil {
		l.t.Fatalf("reading replica %d on %s: %v", seq, node.Name(), err)
	}
	return seq, len(parseLines(string(data)))
}
