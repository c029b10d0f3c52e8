package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
)

// ledgerBallast is the MiB of data the ledger's volume holds besides its
// lines: a failback that moved the volume would move at least that.
const ledgerBallast = 32

// processes are the pids of node's processes whose command line holds
// every word.
func (l *ledger) processes(node *kubenode.Node, words ...string) []int {
	l.t.Helper()
	pids, err := node.Processes()
	if err != nil {
		l.t.Fatal(err)
	}
	var found []int
	for _, pid := range pids {
		if commandHolds(pid, words) {
			found = append(found, pid)
		}
	}
	return found
}

// commandHolds says whether the process's command line holds every
// word, as an argument or a program's base name.
func commandHolds(pid int, words []string) bool {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(cmdline), "\x00")
	return !slices.ContainsFunc(words, func(w string) bool {
		return !slices.Contains(args, w) && !slices.ContainsFunc(args, func(a string) bool { return filepath.Base(a) == w })
	})
}

// waitProcess waits for a process of node whose command line holds
// every word, and returns its pid.
func (l *ledger) waitProcess(node *kubenode.Node, words ...string) int {
	l.t.Helper()
	var found int
	testenv.Eventually(l.t, 30*time.Second, func() error {
		pids, err := node.Processes()
		if err != nil {
			return err
		}
		for _, pid := range pids {
			if commandHolds(pid, words) {
				found = pid
				return nil
			}
		}
		return fmt.Errorf("no process %q on %s yet", words, node.Name())
	})
	return found
}

// ledger is the app of TestFailoverOnRealNodes, primary on a, backup on b,
// replicated by provider.
type ledger struct {
	t        testing.TB
	cl       client.Client
	ns       string
	a, b     *kubenode.Node
	provider string
}

// newLedger runs the ledger on node-local btrfs claims in a namespace of
// its own and waits until its Failover protects it.
func newLedger(t testing.TB, c *cluster.Cluster, cl client.Client, ns string) *ledger {
	return newLedgerOf(t, c, cl, ns, volsyncv1alpha1.ProviderBtrfs)
}

// newLedgerOf is newLedger with the mover provider: strata.dev/btrfs on
// node-local btrfs classes, strata.dev/lvm on the LVM class "fast".
func newLedgerOf(t testing.TB, c *cluster.Cluster, cl client.Client, ns, provider string) *ledger {
	t.Helper()
	l := &ledger{t: t, cl: cl, ns: namespaceFor(t, cl, ns), a: c.Nodes[0], b: c.Nodes[1], provider: provider}
	l.create()
	l.waitPhase(failoverv1alpha1.PhaseProtected, failoverv1alpha1.ActivePrimary)
	return l
}

// create makes both claims, the pair between them, the Deployment on
// the primary and its Failover.
func (l *ledger) create() {
	primary, backup := newClaim(l.ns, "ledger", "1Gi"), newClaim(l.ns, "ledger-backup", "1Gi")
	if l.provider == volsyncv1alpha1.ProviderBtrfs {
		for claim, node := range map[*corev1.PersistentVolumeClaim]*kubenode.Node{primary: l.a, backup: l.b} {
			class := localClass(node.Name())
			claim.Spec.StorageClassName = &class
		}
		create(l.t, l.cl, primary, backup)
	} else {
		// An LVM claim lands on the node of its first pod: each is bound
		// there before the pair is made.
		primary.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("256Mi")
		backup.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("256Mi")
		create(l.t, l.cl, primary, backup)
		bindOn(l.t, l.cl, primary, l.a)
		bindOn(l.t, l.cl, backup, l.b)
	}
	volsynctest.Pair(l.t, l.cl, l.provider, l.ns, "ledger", primary.Name, "ledger-backup", backup.Name, "")
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: "ledger"}, Spec: failoverv1alpha1.FailoverSpec{
		Workload:    failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "ledger"},
		Primary:     failoverv1alpha1.Side{Node: l.a.Name(), Claim: primary.Name},
		Backup:      failoverv1alpha1.Side{Node: l.b.Name(), Claim: backup.Name},
		Replication: failoverv1alpha1.ReplicationReference{Source: "ledger", Destination: "ledger-backup"},
	}}
	create(l.t, l.cl, ledgerDeployment(l.ns, primary.Name), fo)
}

// ledgerDeployment runs the counter on claim. Rolling updates, not
// Recreate: a pod on a lost node never finishes terminating, and the
// failover's pod must not wait for it (docs/failover.md).
func ledgerDeployment(ns, claim string) *appsv1.Deployment {
	one, grace := int32(1), int64(1)
	labels := map[string]string{"app": "ledger"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "ledger", Image: stack.exampleApp, ImagePullPolicy: corev1.PullIfNotPresent,
				Args:           []string{"count", "/data", fmt.Sprint(ledgerBallast)},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		}},
	}}
}

// waitPhase waits for the Failover to reach phase with side active and
// returns it.
func (l *ledger) waitPhase(phase failoverv1alpha1.Phase, side failoverv1alpha1.ActiveSide) *failoverv1alpha1.Failover {
	l.t.Helper()
	fo := &failoverv1alpha1.Failover{}
	testenv.Eventually(l.t, 3*time.Minute, func() error {
		if err := l.cl.Get(context.Background(), client.ObjectKey{Namespace: l.ns, Name: "ledger"}, fo); err != nil {
			return err
		}
		if fo.Status.Phase != phase || fo.Status.Active != side || (phase == failoverv1alpha1.PhaseFailedOver && fo.Status.Timestamps.Started == nil) {
			return fmt.Errorf("Failover %s/ledger is %s with %s active, not yet %s with %s: %v", l.ns, fo.Status.Phase, fo.Status.Active, phase, side, fo.Status.Conditions)
		}
		return nil
	})
	return fo
}

// sync waits for node's writer to have some lines, syncs the pair by
// the manual trigger, and returns the lines the writer held before.
func (l *ledger) sync(trigger string, node *kubenode.Node) []line {
	l.t.Helper()
	lines := l.serving(node, 10)
	volsynctest.SetManual(l.t, l.cl, l.ns, "ledger", trigger)
	volsynctest.Synced(l.t, l.cl, l.ns, "ledger", trigger)
	return lines
}

func (l *ledger) annotate(key, value string) {
	l.t.Helper()
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: "ledger"}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := l.cl.Patch(context.Background(), fo, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		l.t.Fatal(err)
	}
}

// serving waits for a ready ledger pod on node whose file has at least
// n lines, and returns them.
func (l *ledger) serving(node *kubenode.Node, n int) []line {
	l.t.Helper()
	var lines []line
	testenv.Eventually(l.t, 3*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := l.cl.List(context.Background(), pods, client.InNamespace(l.ns), client.MatchingLabels{"app": "ledger"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != node.Name() || p.DeletionTimestamp != nil || !podReady(&p) {
				continue
			}
			body, err := fetch("http://" + p.Status.PodIP + ":8080/")
			if err != nil {
				return err
			}
			if lines = parseLines(body); len(lines) < n {
				return fmt.Errorf("pod %s on %s has %d lines, waiting for %d", p.Name, node.Name(), len(lines), n)
			}
			return nil
		}
		return fmt.Errorf("no ready ledger pod on %s yet", node.Name())
	})
	return lines
}

// linesOnDisk reads the ledger's file on node's own btrfs disk, which
// the node alone mounts: the primary's volume, which no pod serves after
// a failover.
func (l *ledger) linesOnDisk(node *kubenode.Node) []line {
	l.t.Helper()
	files := filepath.Join(btrfsHost.Base, btrfsHost.Tenant, "*", "data", "sequence")
	out, err := node.Command("sh", "-c", "cat "+files).Output()
	if err != nil {
		l.t.Fatalf("reading %s on node %s: %v", files, node.Name(), err)
	}
	return parseLines(string(out))
}

// checkTakeover checks what B serves after the failover against what A
// held: B starts from the replica, which holds every line A had before
// the sync, continues its numbers, and writes only after A's last write.
func (l *ledger) checkTakeover(synced, onB, onA []line) {
	l.t.Helper()
	if !isPrefix(synced, onB) {
		l.t.Fatalf("B serves %s, not every line A held before the sync (%s)", describe(onB), describe(synced))
	}
	fromA := slices.IndexFunc(onB, func(x line) bool { return x.host != synced[0].host })
	if fromA < 0 {
		l.t.Fatalf("B serves no line of its own: %s", describe(onB))
	}
	if !isPrefix(onB[:fromA], onA) {
		l.t.Fatalf("B's copy of A's lines (%s) is not what A's disk holds (%s)", describe(onB[:fromA]), describe(onA))
	}
	if next := onB[fromA]; next.seq != onB[fromA-1].seq+1 {
		l.t.Errorf("B's writer went on from line %d, after the replica's last line %d", next.seq, onB[fromA-1].seq)
	}
	if lastA, firstB := onA[len(onA)-1], onB[fromA]; lastA.at >= firstB.at {
		l.t.Fatalf("two writers overlapped: A wrote line %d at %s, B wrote line %d at %s",
			lastA.seq, time.Unix(0, lastA.at).Format(time.RFC3339Nano), firstB.seq, time.Unix(0, firstB.at).Format(time.RFC3339Nano))
	}
	l.t.Logf("A's last write %s before B's first; B lost %d lines A wrote after the sync",
		time.Duration(onB[fromA].at-onA[len(onA)-1].at).Round(time.Millisecond), len(onA)-fromA)
}

// line is one line of the ledger: its number, the pod that wrote it, and
// when.
type line struct {
	seq  int64
	host string
	at   int64
}

func parseLines(body string) []line {
	var lines []line
	for _, s := range strings.Split(body, "\n") {
		var x line
		if _, err := fmt.Sscan(s, &x.seq, &x.host, &x.at); err == nil {
			lines = append(lines, x)
		}
	}
	return lines
}

func isPrefix(prefix, of []line) bool {
	return len(prefix) <= len(of) && slices.Equal(prefix, of[:len(prefix)])
}

func describe(lines []line) string {
	if len(lines) == 0 {
		return "no lines"
	}
	first, last := lines[0], lines[len(lines)-1]
	return fmt.Sprintf("%d lines, %d by %s to %d by %s", len(lines), first.seq, first.host, last.seq, last.host)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func fetch(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	return string(body), err
}
