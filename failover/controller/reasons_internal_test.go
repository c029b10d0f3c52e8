package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/events"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
)

// A backup that has had no sync yet (a destination without a status) has
// no data age to judge: nothing is told, and nothing fails.
func TestABackupWithoutASyncHasNoDataAge(t *testing.T) {
	rec := events.NewFakeRecorder(1)
	r := &Reconciler{Now: time.Now, Events: rec}
	fo := &failoverv1alpha1.Failover{}
	r.checkDataAge(fo, &app{destination: &volsyncv1alpha1.ReplicationDestination{}})
	if len(fo.Status.Conditions) != 0 || len(rec.Events) != 0 {
		t.Fatalf("conditions %v, %d events", fo.Status.Conditions, len(rec.Events))
	}
}
