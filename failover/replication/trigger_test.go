package replication

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
)

func TestTriggers(t *testing.T) {
	at := func(clock string) time.Time {
		v, err := time.Parse(time.DateTime, "2026-11-24 "+clock)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	source := func(trigger *volsyncv1alpha1.ReplicationSourceTriggerSpec, st volsyncv1alpha1.ReplicationSourceStatus) *volsyncv1alpha1.ReplicationSource {
		return &volsyncv1alpha1.ReplicationSource{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Time{Time: at("10:00:30")}},
			Spec: volsyncv1alpha1.ReplicationSourceSpec{Trigger: trigger}, Status: &st}
	}
	every5 := &volsyncv1alpha1.ReplicationSourceTriggerSpec{Schedule: ptr.To("*/5 * * * *")}
	for _, c := range []struct {
		name    string
		rs      *volsyncv1alpha1.ReplicationSource
		now     string
		due     bool
		wait    time.Duration
		invalid bool
	}{
		{"schedule, before its first time", source(every5, volsyncv1alpha1.ReplicationSourceStatus{}), "10:03:00", false, 2 * time.Minute, false},
		{"schedule, at its first time", source(every5, volsyncv1alpha1.ReplicationSourceStatus{}), "10:05:00", true, 0, false},
		{"schedule, after a sync that started at 10:05", source(every5, volsyncv1alpha1.ReplicationSourceStatus{
			LastSyncStartTime: &metav1.Time{Time: at("10:05:00")}}), "10:06:00", false, 4 * time.Minute, false},
		{"schedule, missed while down", source(every5, volsyncv1alpha1.ReplicationSourceStatus{
			LastSyncStartTime: &metav1.Time{Time: at("10:05:00")}}), "11:00:00", true, 0, false},
		{"manual, new value", source(&volsyncv1alpha1.ReplicationSourceTriggerSpec{Manual: "b"},
			volsyncv1alpha1.ReplicationSourceStatus{LastManualSync: "a"}), "10:00:00", true, 0, false},
		{"manual, done", source(&volsyncv1alpha1.ReplicationSourceTriggerSpec{Manual: "b"},
			volsyncv1alpha1.ReplicationSourceStatus{LastManualSync: "b"}), "10:00:00", false, 0, false},
		{"continuous, right after a sync", source(nil, volsyncv1alpha1.ReplicationSourceStatus{
			LastSyncTime: &metav1.Time{Time: at("10:00:58")}}), "10:01:00", false, 8 * time.Second, false},
		{"continuous, the pause over", source(nil, volsyncv1alpha1.ReplicationSourceStatus{
			LastSyncTime: &metav1.Time{Time: at("10:00:50")}}), "10:01:00", true, 0, false},
		{"a schedule cron cannot read", source(&volsyncv1alpha1.ReplicationSourceTriggerSpec{Schedule: ptr.To("61 * * * *")},
			volsyncv1alpha1.ReplicationSourceStatus{}), "10:00:00", false, 0, true},
	} {
		r := &SourceReconciler{Continuous: 10 * time.Second, Now: func() time.Time { return at(c.now) }}
		due, wait, err := r.due(c.rs)
		if due != c.due || wait != c.wait || (err != nil) != c.invalid {
			t.Errorf("%s: due %v, wait %s, error %v; want due %v, wait %s, an error %v", c.name, due, wait, err, c.due, c.wait, c.invalid)
		}
	}
}
