package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/fluxevents"
	"github.com/strata-gitops/strata/internal/status"
)

// The reasons of the Failover events an Alert may select on
// (docs/notifications.md lists them); they do not change between
// releases.
const (
	// ReasonFailoverStarted: the primary's Lease went stale past
	// unreachableAfter, and the controller starts failing over.
	ReasonFailoverStarted = "FailoverStarted"
	// ReasonFailoverCompleted: the app is ready on the backup; the event
	// says the data age at promotion and how long it took from detection.
	ReasonFailoverCompleted = "FailoverCompleted"
	// ReasonNodeLeaseStale: the primary's agent stopped renewing its Lease
	// while the node's kubelet renews the node's: no failover while the
	// node lives, and a person is needed.
	ReasonNodeLeaseStale = "NodeLeaseStale"
	// ReasonDataAgeExceeded: the backup's newest replica is older than
	// the policy's maxDataAge while the app runs on the primary: a
	// failover now would wait for a person.
	ReasonDataAgeExceeded = "DataAgeExceeded"
)

// ConditionDataFresh says whether the backup's newest replica is within
// maxDataAge.
const ConditionDataFresh = "DataFresh"

// completed records FailoverCompleted, with the data age, the time from
// detection and the node in the event's metadata for Alerts.
func (r *Reconciler) completed(fo *failoverv1alpha1.Failover) {
	ts := fo.Status.Timestamps
	took := time.Duration(0)
	if ts.Detected != nil && ts.Started != nil {
		took = ts.Started.Sub(ts.Detected.Time).Round(time.Millisecond)
	}
	age := time.Duration(0)
	if fo.Status.DataAgeAtPromotion != nil {
		age = fo.Status.DataAgeAtPromotion.Duration
	}
	meta := map[string]string{"dataAge": age.String(), "duration": took.String(), "node": fo.Spec.Backup.Node}
	fluxevents.Eventf(r.Events, meta, fo, corev1.EventTypeNormal, ReasonFailoverCompleted, "Start",
		"%s %s runs on node %s: failed over in %s from detection (%s), serving data %s old", fo.Spec.Workload.Kind, fo.Spec.Workload.Name,
		fo.Spec.Backup.Node, took, detectedAt(fo), age)
}

// detectedAt names the failover by when it was detected. Alerts drop an
// event equal to one sent within five minutes (as Flux's do), so two
// failovers of one app whose messages happen to read the same (a Lease
// 15.012 s old both times) must still differ.
func detectedAt(fo *failoverv1alpha1.Failover) string {
	if fo.Status.Timestamps.Detected == nil {
		return "just now"
	}
	return fo.Status.Timestamps.Detected.UTC().Format("2006-01-02T15:04:05.000Z")
}

// checkDataAge sets DataFresh from the backup's last sync, and records
// DataAgeExceeded when the newest replica passes maxDataAge (once, when
// the condition turns).
func (r *Reconciler) checkDataAge(fo *failoverv1alpha1.Failover, a *app) {
	if a.destination.Status == nil || a.destination.Status.LastSyncTime == nil {
		return // no sync yet: the Failover says so while it waits for one
	}
	last := a.destination.Status.LastSyncTime
	age, limit := r.Now().Sub(last.Time).Round(time.Second), policy(fo).MaxDataAge.Duration
	if age <= limit {
		status.Set(fo, ConditionDataFresh, metav1.ConditionTrue, "WithinMaxDataAge",
			fmt.Sprintf("the backup's newest replica is %s old (maxDataAge %s)", age, limit))
		return
	}
	msg := fmt.Sprintf("the backup's newest replica is %s old, more than maxDataAge %s: a failover now would wait for a person; see why ReplicationDestination %s has no newer sync", age, limit, a.destination.Name)
	if c := apimeta.FindStatusCondition(fo.Status.Conditions, ConditionDataFresh); c == nil || c.Status != metav1.ConditionFalse {
		fluxevents.Eventf(r.Events, map[string]string{"dataAge": age.String(), "maxDataAge": limit.String()}, fo,
			corev1.EventTypeWarning, ReasonDataAgeExceeded, "Check", "%s", msg)
	}
	status.Set(fo, ConditionDataFresh, metav1.ConditionFalse, ReasonDataAgeExceeded, msg)
}
