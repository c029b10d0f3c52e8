package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/dashboard"
)

// A Failover's page shows the latest failover's timeline, detect to
// ready with the time after detection of each step, the data age at
// promotion, and marks a backup older than maxDataAge.
func TestAFailoversTimelineIsShown(t *testing.T) {
	f := newFixture(t)
	makeFailover(t, f)
	srv, _ := f.serve(t, dashboard.Open{})
	_, body := get(t, srv.URL+"/failovers", "")
	for _, want := range []string{
		`data-failover="` + f.mine + `/ledger"`, `data-phase="FailedOver"`, "runs on the backup, " + f.nodeB,
		`<li data-step="detected">detected <span class="after">+0s</span>`, `<li data-step="fenced">fenced <span class="after">+5ms</span>`,
		`<li data-step="promoted">promoted <span class="after">+33ms</span>`, `<li data-step="ready">ready <span class="after">+3.975s</span>`,
		"<span data-age-at-promotion>15.044s</span>", `data-mark="data-age"`,
		`data-pair="` + f.mine + `/db" class="needs-person"`, "db → db-backup", "<td>1.5 MiB</td><td>8 / 7</td>", "of 1h0m0s <span class=\"mark\" data-mark=\"data-age\">",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the failovers page lacks %s", want)
		}
	}
	if strings.Contains(body, `data-step="failed back"`) {
		t.Error("a failback step shown before one happened")
	}
}

// makeFailover makes the Failover ledger in f.mine, failed over from
// node a to b a minute ago, its pair's backup two hours old.
func makeFailover(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	c := f.env.Client
	dest := &volsyncv1alpha1.ReplicationDestination{ObjectMeta: metav1.ObjectMeta{Name: "db-backup", Namespace: f.mine}}
	if err := c.Create(ctx, dest); err != nil {
		t.Fatal(err)
	}
	synced := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	dest.Status = &volsyncv1alpha1.ReplicationDestinationStatus{LastSyncTime: &synced, External: map[string]string{"replica": "7"}}
	if err := c.Status().Update(ctx, dest); err != nil {
		t.Fatal(err)
	}
	source := &volsyncv1alpha1.ReplicationSource{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: f.mine},
		Spec: volsyncv1alpha1.ReplicationSourceSpec{SourcePVC: "db", External: &volsyncv1alpha1.ExternalSpec{
			Provider: "strata.dev/btrfs", Parameters: map[string]string{"destination": "db-backup"}}}}
	if err := c.Create(ctx, source); err != nil {
		t.Fatal(err)
	}
	source.Status = &volsyncv1alpha1.ReplicationSourceStatus{External: map[string]string{"replica": "8", "streamBytes": "1572864"}}
	if err := c.Status().Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Name: "ledger", Namespace: f.mine}, Spec: failoverv1alpha1.FailoverSpec{
		Workload:    failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "ledger"},
		Primary:     failoverv1alpha1.Side{Node: f.nodeA, Claim: "db"},
		Backup:      failoverv1alpha1.Side{Node: f.nodeB, Claim: "db-backup"},
		Replication: failoverv1alpha1.ReplicationReference{Source: "db", Destination: "db-backup"},
	}}
	if err := c.Create(ctx, fo); err != nil {
		t.Fatal(err)
	}
	detected := time.Now().Add(-time.Minute)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(detected.Add(d)); return &m }
	fo.Status = failoverv1alpha1.FailoverStatus{Phase: failoverv1alpha1.PhaseFailedOver, Active: failoverv1alpha1.ActiveBackup,
		DataAgeAtPromotion: &metav1.Duration{Duration: 15044 * time.Millisecond}, FencedBy: "AgentSelfFence fenced node " + f.nodeA,
		Timestamps: failoverv1alpha1.PhaseTimestamps{Detected: at(0), Fenced: at(5 * time.Millisecond), Promoted: at(33 * time.Millisecond),
			Started: at(3975 * time.Millisecond)}}
	if err := c.Status().Update(ctx, fo); err != nil {
		t.Fatal(err)
	}
}
