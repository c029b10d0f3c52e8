// Package volsynctest drives VolSync's objects for the tests of strata's
// movers: the replication reconcilers on a manager, a pair of
// ReplicationSource and ReplicationDestination, manual syncs.
package volsynctest

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/mover"
)

// SetUpReplication registers strata's VolSync movers with the manager,
// reaching the agents through agents: destinations refreshed every
// 200 ms, sources on manual triggers.
func SetUpReplication(mgr manager.Manager, agents mover.Agents) error {
	if err := (&replication.DestinationReconciler{Client: mgr.GetClient(), Agents: agents, Refresh: 200 * time.Millisecond}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&replication.SourceReconciler{Client: mgr.GetClient(), Agents: agents, Continuous: time.Hour,
		SyncTimeout: time.Minute, Now: time.Now}).SetupWithManager(mgr)
}

// Pair creates, in ns, the ReplicationDestination dest for claim
// destClaim and the ReplicationSource source of sourceClaim that sends
// to it, both of provider, the source on a manual trigger.
func Pair(t testing.TB, c client.Client, provider, ns, source, sourceClaim, dest, destClaim, manual string) {
	t.Helper()
	rd := &volsyncv1alpha1.ReplicationDestination{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dest},
		Spec: volsyncv1alpha1.ReplicationDestinationSpec{External: &volsyncv1alpha1.ExternalSpec{Provider: provider,
			Parameters: map[string]string{rules.ParamDestinationPVC: destClaim}}}}
	rs := &volsyncv1alpha1.ReplicationSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: source},
		Spec: volsyncv1alpha1.ReplicationSourceSpec{SourcePVC: sourceClaim, Trigger: &volsyncv1alpha1.ReplicationSourceTriggerSpec{Manual: manual},
			External: &volsyncv1alpha1.ExternalSpec{Provider: provider,
				Parameters: map[string]string{rules.ParamDestination: dest}}}}
	for _, o := range []client.Object{rd, rs} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// SetManual sets the source's manual trigger: one sync more.
func SetManual(t testing.TB, c client.Client, ns, source, manual string) {
	t.Helper()
	rs := &volsyncv1alpha1.ReplicationSource{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: source}, rs); err != nil {
		t.Fatal(err)
	}
	rs.Spec.Trigger.Manual = manual
	if err := c.Update(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
}

// Synced waits for the source to report the manual sync done, and
// returns its status.
func Synced(t testing.TB, c client.Client, ns, source, manual string) *volsyncv1alpha1.ReplicationSourceStatus {
	t.Helper()
	rs := &volsyncv1alpha1.ReplicationSource{}
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: source}, rs); err != nil {
			return err
		}
		if rs.Status == nil || rs.Status.LastManualSync != manual {
			return fmt.Errorf("source status %+v", rs.Status)
		}
		return nil
	})
	return rs.Status
}
