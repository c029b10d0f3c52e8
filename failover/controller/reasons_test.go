package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// wantEvent waits for an event of the Failover with the reason, and
// returns its note.
func wantEvent(t *testing.T, w *fakeWorld, reason string) string {
	t.Helper()
	var note string
	testenv.Eventually(t, 30*time.Second, func() error {
		var list eventsv1.EventList
		if err := w.c.List(context.Background(), &list, client.InNamespace(w.ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Failover" && e.Reason == reason {
				note = e.Note
				return nil
			}
			seen = append(seen, e.Reason)
		}
		return fmt.Errorf("no %s event among %v", reason, seen)
	})
	return note
}

// A failover is told at its start and at its end, with the stable
// reasons Alerts select on; the end says the data age and how long it
// took.
func TestAFailoverIsToldAtItsStartAndEnd(t *testing.T) {
	t.Parallel()
	w := protected(t, failoverv1alpha1.FencingAgentSelfFence)
	w.lose()
	started := wantEvent(t, w, controller.ReasonFailoverStarted)
	if !strings.Contains(started, "has not renewed its Lease") || !strings.Contains(started, "over to node "+w.fb.Name) || !strings.Contains(started, "(detected 20") {
		t.Fatalf("FailoverStarted says %q", started)
	}
	w.runDeployment(t, "db-backup")
	fo := w.wantFailover(t, readyAs("FailedOver"))
	done := wantEvent(t, w, controller.ReasonFailoverCompleted)
	took := fo.Status.Timestamps.Started.Sub(fo.Status.Timestamps.Detected.Time).Round(time.Millisecond)
	if !strings.Contains(done, fmt.Sprintf("failed over in %s", took)) ||
		!strings.Contains(done, fmt.Sprintf("serving data %s old", fo.Status.DataAgeAtPromotion.Duration)) {
		t.Fatalf("FailoverCompleted says %q; took %s, data age %s", done, took, fo.Status.DataAgeAtPromotion.Duration)
	}
}

// While the app runs on the primary, a backup whose newest replica
// passes maxDataAge turns DataFresh false and is told once.
func TestADataAgePastMaxDataAgeIsTold(t *testing.T) {
	t.Parallel()
	w := newFakeWorld(t)
	w.app(t)
	w.failoverOf(t, failoverv1alpha1.FencingAgentSelfFence, time.Second)
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		c := apimeta.FindStatusCondition(fo.Status.Conditions, controller.ConditionDataFresh)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "more than maxDataAge 1s") {
			return fmt.Errorf("DataFresh %+v", c)
		}
		return nil
	})
	note := wantEvent(t, w, controller.ReasonDataAgeExceeded)
	if !strings.Contains(note, "a failover now would wait for a person") {
		t.Fatalf("DataAgeExceeded says %q", note)
	}
}
