package replication_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/lvmagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
)

// lvmWorld is an API server with the replication reconcilers running,
// and two nodes' LVM agents, each on its own loopback address.
type lvmWorld struct {
	*world
	a, b lvmagent.Agent
}

func newLVMWorld(t *testing.T) *lvmWorld {
	t.Helper()
	testenv.NeedRoot(t, "volume groups on loop devices")
	env := testenv.Get(t)
	n := counter.Add(1)
	w := &lvmWorld{world: &world{c: env.Client, ns: fmt.Sprintf("repl-%d-%d", os.Getpid(), n)}}
	if err := w.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
		t.Fatal(err)
	}
	cl := lvmagent.NewCluster(t, w.c, w.ns)
	w.a = cl.Start(t, w.c, w.ns+"-a", "127.0.0.2", fmt.Sprintf("strata-repl-%d-a", n))
	w.b = cl.Start(t, w.c, w.ns+"-b", "127.0.0.3", fmt.Sprintf("strata-repl-%d-b", n))
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return volsynctest.SetUpReplication(mgr, cl.Agents(mgr.GetClient(), nil))
	})
	return w
}

// A pair of LVM claims replicates through VolSync's objects with
// provider strata.dev/lvm, as btrfs ones do: node agent to node agent,
// a block delta from the newest replica both hold.
func TestLVMClaimsReplicateThroughVolSync(t *testing.T) {
	w := newLVMWorld(t)
	w.a.Claim(t, w.c, w.ns, "db", 32*mib)
	w.b.Claim(t, w.c, w.ns, "db-backup", 32*mib)
	first := w.a.Write(t, "db", 0, 4*mib)
	volsynctest.Pair(t, w.c, volsyncv1alpha1.ProviderLVM, w.ns, "db", "db", "db-backup", "db-backup", "one")
	st := volsynctest.Synced(t, w.c, w.ns, "db", "one")
	if st.LatestMoverStatus == nil || st.LatestMoverStatus.Result != volsyncv1alpha1.MoverResultSuccessful || st.External["replica"] != "1" {
		t.Fatalf("after the first sync the source's status is %+v", st)
	}
	second := w.a.Write(t, "db", 16*mib, 1*mib)
	volsynctest.SetManual(t, w.c, w.ns, "db", "two")
	st = volsynctest.Synced(t, w.c, w.ns, "db", "two")
	sent, _ := strconv.ParseInt(st.External["streamBytes"], 10, 64)
	if st.External["replica"] != "2" || sent < 1*mib || sent > 1*mib+64<<10 {
		t.Fatalf("the second sync reported %v; want replica 2 with only the 1 MiB written since", st.External)
	}
	w.wantDestination(t, "db-backup", "2")

	if _, err := w.b.Store.Promote(context.Background(), lvmagent.Tenant, w.ns+".db-backup"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.b.Read(t, "db-backup", 0, 4*mib), first) || !bytes.Equal(w.b.Read(t, "db-backup", 16*mib, 1*mib), second) {
		t.Fatal("the promoted backup does not hold what the source wrote")
	}
}

// A pair whose provider is not its claims' mover gets a clear condition
// and moves nothing.
func TestAPairOfTheWrongMoverGetsAClearCondition(t *testing.T) {
	w := newLVMWorld(t)
	w.a.Claim(t, w.c, w.ns, "db", 16*mib)
	w.b.Claim(t, w.c, w.ns, "db-backup", 16*mib)
	volsynctest.Pair(t, w.c, volsyncv1alpha1.ProviderBtrfs, w.ns, "db", "db", "db-backup", "db-backup", "one")
	w.wantCondition(t, &volsyncv1alpha1.ReplicationDestination{}, "db-backup", "set spec.external.provider to strata.dev/lvm")
	if _, err := w.b.Store.GetPair(context.Background(), lvmagent.Tenant, w.ns+".db-backup"); err == nil {
		t.Error("the refused pair was set up on the backup's agent")
	}
}
