package controller_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/internal/testing/lvmagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/mover"
)

// newLVMWorld is the world with LVM agents: claims db and db-backup are
// thin volumes on two nodes' volume groups, replicated by strata.dev/lvm.
func newLVMWorld(t *testing.T) (w *world, a, b lvmagent.Agent) {
	t.Helper()
	testenv.NeedRoot(t, "volume groups on loop devices")
	w = emptyWorld(t)
	w.provider = volsyncv1alpha1.ProviderLVM
	cl := lvmagent.NewCluster(t, w.c, w.ns)
	n := counter.Load()
	a = cl.Start(t, w.c, w.node("a"), "127.0.0.4", fmt.Sprintf("strata-fo-%d-a", n))
	b = cl.Start(t, w.c, w.node("b"), "127.0.0.5", fmt.Sprintf("strata-fo-%d-b", n))
	w.agents = func(mgr manager.Manager) mover.Agents { return cl.Agents(mgr.GetClient(), nil) }
	w.beat(t, a.Node)
	w.beat(t, b.Node)
	a.Claim(t, w.c, w.ns, "db", 32*mib)
	b.Claim(t, w.c, w.ns, "db-backup", 32*mib)
	w.run(t, selfFenceAfter)
	return w, a, b
}

// A lost node's logical volume fails over and back as a btrfs one does:
// the backup serves the last synced data, the old primary's unsynced
// writes are never served, and failback brings what the backup wrote.
func TestALostNodesLogicalVolumeFailsOverAndBack(t *testing.T) {
	w, a, b := newLVMWorld(t)
	synced := a.Write(t, "db", 0, 4*mib)
	w.app(t)
	a.Write(t, "db", 8*mib, 1*mib) // never replicated: lost with the node
	w.failover(t, failoverv1alpha1.FencingAgentSelfFence)
	w.wantFailover(t, readyAs("Protected"))

	lost := time.Now()
	w.beats[a.Node]()
	w.runDeployment(t, "db-backup")
	fo := w.wantFailover(t, readyAs("FailedOver"))
	t.Logf("lost at %s; promoted +%s", lost.Format(time.StampMilli), fo.Status.Timestamps.Promoted.Sub(lost))
	zeros := make([]byte, 1*mib)
	if !bytes.Equal(b.Read(t, "db-backup", 0, 4*mib), synced) || !bytes.Equal(b.Read(t, "db-backup", 8*mib, 1*mib), zeros) {
		t.Fatal("the backup does not serve exactly the last synced data")
	}

	during := b.Write(t, "db-backup", 12*mib, 1*mib)
	w.beat(t, a.Node)
	w.annotate(t, controller.AnnotationFailback, "true")
	w.runDeployment(t, "db")
	w.wantFailover(t, func(fo *failoverv1alpha1.Failover) error {
		if fo.Status.Active != failoverv1alpha1.ActivePrimary || fo.Status.Timestamps.FailedBack == nil {
			return fmt.Errorf("status %+v", fo.Status)
		}
		return nil
	})
	if !bytes.Equal(a.Read(t, "db", 0, 4*mib), synced) || !bytes.Equal(a.Read(t, "db", 12*mib, 1*mib), during) {
		t.Error("after failback the primary does not hold what the backup served and wrote")
	}
	if !bytes.Equal(a.Read(t, "db", 8*mib, 1*mib), zeros) {
		t.Error("after failback the primary still serves what it wrote after it was cut off")
	}
}
