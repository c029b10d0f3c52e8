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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// fencingSays waits until the Failover is fencing, not promoted, with a
// Reconciling message holding want.
func (w *world) fencingSays(t testing.TB, want string) {
	t.Helper()
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReconcilingCondition)
		if fo.Status.Phase != failoverv1alpha1.PhaseFencing || c == nil || !strings.Contains(c.Message, want) {
			return fmt.Errorf("phase %s, Reconciling %+v; want fencing with %q", fo.Status.Phase, c, want)
		}
		if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.Promoted != nil {
			return fmt.Errorf("promoted while fencing: %+v", fo.Status)
		}
		return nil
	})
}

// The agent's silence means nothing while the node's kubelet renews its
// Lease: the agent died on a live node (killed, out of memory, an
// upgrade pulling its image), nothing fenced, and the app may be
// writing there. No backup starts until the kubelet is silent too.
func TestAnAgentDownOnALiveNodeIsNotFailedOver(t *testing.T) {
	w := newWorld(t, selfFenceAfter)
	stopKubelet := w.kubelet(t, w.node("a"))
	w.app(t)
	w.failover(t, failoverv1alpha1.FencingAgentSelfFence)
	w.wantFailover(t, readyAs("Protected"))
	w.beats[w.node("a")]() // the agent dies; the node lives
	w.fencingSays(t, "its kubelet renews the node's")
	// The node is lost as well: now the agent's self-fence holds.
	stopKubelet()
	w.runDeployment(t, "db-backup")
	w.wantFailover(t, readyAs("FailedOver"))
}

// An agent that does not fence itself, or fences later than the
// controller waits, is not trusted to have fenced: a person confirms.
func TestAnAgentThatDoesNotFenceInTimeWaitsForAPerson(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		says  string
	}{
		{"never", 0, "does not fence itself"},
		{"too late", selfFenceAfter, "raise the controller's to at least"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, selfFenceAfter)
			w.beats[w.node("a")]()
			w.beatFencing(t, w.node("a"), tc.after)
			w.app(t)
			w.failover(t, failoverv1alpha1.FencingAgentSelfFence)
			w.wantFailover(t, readyAs("Protected"))
			w.beats[w.node("a")]()
			w.fencingSays(t, tc.says)
			w.annotate(t, controller.AnnotationFenced, w.node("a"))
			w.runDeployment(t, "db-backup")
			w.wantFailover(t, readyAs("FailedOver"))
		})
	}
}

// A controller whose wait is shorter than an agent needs to have surely
// fenced refuses to start.
func TestAControllerShorterThanItsAgentsRefusesToStart(t *testing.T) {
	w := newWorld(t, selfFenceAfter)
	w.beats[w.node("a")]()
	w.beatFencing(t, w.node("a"), 5*time.Second)
	testenv.Eventually(t, timeout, func() error {
		mgr, err := ctrl.NewManager(testenv.Get(t).Config, testenv.ManagerOptions())
		if err != nil {
			return err
		}
		err = (&controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), LeaseNamespace: w.ns,
			SelfFenceAfter: selfFenceAfter, Events: mgr.GetEventRecorder("test"), Now: time.Now}).SetupWithManager(mgr)
		if err == nil || !strings.Contains(err.Error(), "--self-fence-after 1.5s is too short") {
			return fmt.Errorf("SetupWithManager = %v; want a refusal naming the flag", err)
		}
		return nil
	})
}

// OutOfServiceTaint starts the backup only once the node's pods on the
// primary's claim are gone, and takes the taint off at failback.
func TestOutOfServiceTaintWaitsForThePodsAndIsRemovedAtFailback(t *testing.T) {
	w := newWorld(t, selfFenceAfter)
	w.app(t)
	ctx := context.Background()
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "app-old", Labels: map[string]string{"app": "app"}},
		Spec: corev1.PodSpec{NodeName: w.node("a"), Containers: []corev1.Container{{Name: "app", Image: "example-app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db"}}}}}}
	if err := w.c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	w.failover(t, failoverv1alpha1.FencingOutOfServiceTaint)
	w.wantFailover(t, readyAs("Protected"))
	w.beats[w.node("a")]()
	w.fencingSays(t, "waiting for pods app-old on claim db to be gone")
	// The pod garbage collector removes the tainted node's pods.
	if err := w.c.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	w.runDeployment(t, "db-backup")
	w.wantFailover(t, readyAs("FailedOver"))

	w.beat(t, w.node("a"))
	w.annotate(t, controller.AnnotationFailback, "true")
	w.runDeployment(t, "db")
	w.wantFailover(t, readyAs("Protected"))
	n := &corev1.Node{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: w.node("a")}, n); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
		t.Fatalf("node a keeps the out-of-service taint after the failback: %+v", n.Spec.Taints)
	}
}

// At failback the backup is made writable again only once the app's
// pods on it are gone: one restarting there would take writes no one
// replicates.
func TestFailbackUnfencesTheBackupOnlyOnceItsPodsAreGone(t *testing.T) {
	w := newWorld(t, selfFenceAfter)
	w.app(t)
	w.failover(t, failoverv1alpha1.FencingAgentSelfFence)
	w.wantFailover(t, readyAs("Protected"))
	w.beats[w.node("a")]()
	w.runDeployment(t, "db-backup")
	w.wantFailover(t, readyAs("FailedOver"))
	w.beat(t, w.node("a"))
	w.annotate(t, controller.AnnotationFailback, "true")
	// The app is switched back, but its pod on the backup lives on.
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReconcilingCondition)
		if fo.Status.Active != failoverv1alpha1.ActivePrimary || c == nil || !strings.Contains(c.Message, "on claim db-backup to be gone") {
			return fmt.Errorf("active %s, Reconciling %+v", fo.Status.Active, c)
		}
		return nil
	})
	if p, err := w.b.Store.GetPair(context.Background(), btrfsagent.Tenant, w.ns+".db-backup"); err == nil && !p.Fenced {
		t.Fatalf("the backup was unfenced while the app's pod still runs on it: %+v", p)
	}
	w.runDeployment(t, "db") // the Deployment controller replaces the old pod
	w.wantFailover(t, readyAs("Protected"))
}
