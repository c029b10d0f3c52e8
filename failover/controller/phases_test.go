package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/internal/testing/fakeagent"
)

// The phase machine on fake agents, each test beside the others: every
// phase (Protected, Unreachable, Fencing, Promoting, FailedOver,
// Resyncing, FailingBack, WaitingForPerson) and every fencing mode, and a
// crash between any two steps. The same paths run against real btrfs
// agents in the tests beside these (root).

// failoverAt waits for the Failover to be in phase.
func failoverAt(t *testing.T, w *fakeWorld, phase failoverv1alpha1.Phase) *failoverv1alpha1.Failover {
	t.Helper()
	return w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		if fo.Status.Phase != phase {
			return fmt.Errorf("phase %s, want %s (%+v)", fo.Status.Phase, phase, fo.Status.Conditions)
		}
		return nil
	})
}

// protected runs the app on the primary with a Failover of the given
// fencing mode, its first replica synced.
func protected(t *testing.T, fencing failoverv1alpha1.FencingMode) *fakeWorld {
	t.Helper()
	w := newFakeWorld(t)
	w.app(t)
	w.failoverOf(t, fencing, 0)
	w.wantFailover(t, readyAs("Protected"))
	return w
}

// failedOverAndBack loses node a, fails over, brings the node back and
// fails back, checking what each side serves.
func failedOverAndBack(t *testing.T, w *fakeWorld, duringFailover func()) {
	t.Helper()
	if err := w.fa.Store.Write(fakeagent.Tenant, "db", []byte("written after the last sync: lost with the node")); err != nil {
		t.Fatal(err)
	}
	w.lose()
	duringFailover()
	w.runDeployment(t, "db-backup")
	fo := w.wantFailover(t, readyAs("FailedOver"))
	if fo.Status.Active != failoverv1alpha1.ActiveBackup || fo.Status.Timestamps.Promoted == nil {
		t.Fatalf("status after the failover: %+v", fo.Status)
	}
	wantHolds(t, w.fb, "db-backup", primaryData)
	w.wantSourceStopped(t)

	during := []byte("written on the backup while the primary was away")
	if err := w.fb.Store.Write(fakeagent.Tenant, "db-backup", during); err != nil {
		t.Fatal(err)
	}
	w.comeBack(t)
	w.annotate(t, controller.AnnotationFailback, "true")
	w.runDeployment(t, "db")
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.FailedBack == nil {
			return fmt.Errorf("status %+v", fo.Status)
		}
		return readyAs("Protected")(fo)
	})
	wantHolds(t, w.fa, "db", during)
	w.wantFenced(t, w.fa, false)
}

// AgentSelfFence: the lost node's agent fences itself, the controller
// waits its safe time, promotes the backup and switches the app; the
// node back, the backup's changes go home.
func TestPhasesAgentSelfFence(t *testing.T) {
	t.Parallel()
	w := protected(t, failoverv1alpha1.FencingAgentSelfFence)
	failedOverAndBack(t, w, func() {
		w.wantFenced(t, w.fa, true) // the agent's own self-fence
	})
}

// Manual: nothing is promoted until a person confirms the node is off.
func TestPhasesManual(t *testing.T) {
	t.Parallel()
	w := protected(t, failoverv1alpha1.FencingManual)
	failedOverAndBack(t, w, func() {
		fo := failoverAt(t, w, failoverv1alpha1.PhaseFencing)
		if c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReconcilingCondition); c == nil || !strings.Contains(c.Message, controller.AnnotationFenced) {
			t.Fatalf("fencing says %+v, want it to ask for %s", c, controller.AnnotationFenced)
		}
		w.annotate(t, controller.AnnotationFenced, w.node("a"))
	})
}

// OutOfServiceTaint: the node is tainted, and the taint goes at failback.
func TestPhasesOutOfServiceTaint(t *testing.T) {
	t.Parallel()
	w := protected(t, failoverv1alpha1.FencingOutOfServiceTaint)
	tainted := func() bool {
		n := &corev1.Node{}
		if err := w.c.Get(context.Background(), client.ObjectKey{Name: w.node("a")}, n); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
	}
	failedOverAndBack(t, w, func() {
		w.wantFailover(t, func(*failoverv1alpha1.Failover) error {
			if !tainted() {
				return fmt.Errorf("node a is not tainted out of service")
			}
			return nil
		})
	})
	if tainted() {
		t.Fatal("node a keeps the out-of-service taint after the failback")
	}
}

// A promotion refused for data older than maxDataAge waits for a person
// (WaitingForPerson); the person's answer lets it go on.
func TestPhasesWaitingForPerson(t *testing.T) {
	t.Parallel()
	w := newFakeWorld(t)
	w.app(t)
	w.failoverOf(t, failoverv1alpha1.FencingAgentSelfFence, time.Millisecond)
	w.wantFailover(t, readyAs("Protected"))
	w.lose()
	failoverAt(t, w, failoverv1alpha1.PhaseWaiting)
	w.annotate(t, controller.AnnotationAcceptDataAge, "true")
	w.runDeployment(t, "db-backup")
	w.wantFailover(t, readyAs("FailedOver"))
	wantHolds(t, w.fb, "db-backup", primaryData)
}

// A node back before it is fenced calls the failover off (Unreachable,
// Fencing, then Protected), and what its agent fenced is writable again.
func TestPhasesANodeBackInTime(t *testing.T) {
	t.Parallel()
	w := protected(t, failoverv1alpha1.FencingManual)
	w.lose()
	failoverAt(t, w, failoverv1alpha1.PhaseFencing)
	w.wantFenced(t, w.fa, true)
	w.comeBack(t)
	fo := w.wantFailover(t, readyAs("Protected"))
	if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.Promoted != nil {
		t.Fatalf("status after the node came back: %+v", fo.Status)
	}
	w.wantFenced(t, w.fa, false)
	wantHolds(t, w.fb, "db-backup", nil)
}

// A crash between any two steps: every agent call loses its first
// answer after the agent acted, and the controller restarts the first
// time it is seen in each phase. The failover and the failback still end where
// they would have, serving the same data.
func TestPhasesSurviveACrashBetweenAnyTwoSteps(t *testing.T) {
	t.Parallel()
	w := newFakeWorld(t)
	w.fake.FailOnceAfter()
	w.app(t)
	w.failoverOf(t, failoverv1alpha1.FencingAgentSelfFence, 0)
	w.wantFailover(t, readyAs("Protected"))
	restarts := w.restartOnEveryPhase(t)
	failedOverAndBack(t, w, func() {})
	if n := restarts(); n < 3 {
		t.Fatalf("the controller was restarted %d times, want one at each of at least 3 phases", n)
	}
}

// A controller restarted while the primary is being fenced gives the
// node's agent unreachableAfter before it takes the node for lost again,
// but never takes it for back: the agent's Lease is still stale, so what
// the agent fenced stays fenced, and the failover goes on. Here the
// agent's API still answers while its Lease is not renewed (its
// heartbeat broke, not its node).
func TestPhasesARestartedControllerDoesNotTakeAStaleNodeForBack(t *testing.T) {
	t.Parallel()
	// unreachableAfter long enough that the restarted controller's first
	// reconcile, once its caches have synced, falls within its grace.
	const unreachableAfter = 3 * time.Second
	w := newFakeWorld(t)
	w.app(t)
	w.failoverWith(t, failoverv1alpha1.Policy{UnreachableAfter: metav1.Duration{Duration: unreachableAfter}, Fencing: failoverv1alpha1.FencingManual})
	w.wantFailover(t, readyAs("Protected"))
	w.beats[w.fa.Name]() // the Lease goes stale; the agent's API still answers
	failoverAt(t, w, failoverv1alpha1.PhaseFencing)
	w.wantFenced(t, w.fa, true) // by the agent's own self-fence
	w.stop()
	w.runHere(t)
	// Longer than the new controller's grace for the Lease.
	until := time.Now().Add(unreachableAfter + time.Second)
	for time.Now().Before(until) {
		fo := &failoverv1alpha1.Failover{}
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "app"}, fo); err != nil {
			t.Fatal(err)
		}
		if fo.Status.Phase == failoverv1alpha1.PhaseProtected {
			t.Fatalf("a restarted controller took node a, whose Lease is stale, for back: %+v", fo.Status)
		}
		if p, err := w.fa.Store.GetPair(context.Background(), fakeagent.Tenant, w.ns+".db-backup"); err != nil || !p.Fenced {
			t.Fatalf("a restarted controller unfenced the stale node's volume: %+v (%v)", p, err)
		}
		time.Sleep(20 * time.Millisecond) // sampling a window: nothing to wait for
	}
	w.annotate(t, controller.AnnotationFenced, w.node("a"))
	w.runDeployment(t, "db-backup")
	w.wantFailover(t, readyAs("FailedOver"))
}
