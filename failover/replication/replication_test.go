package replication_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/volsynctest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	mib     = 1 << 20
	tenant  = btrfsagent.Tenant
	timeout = time.Minute
)

var counter atomic.Int32

// world is an API server with the replication reconcilers running, and
// two nodes' agents.
type world struct {
	c    client.Client
	ns   string
	a, b btrfsagent.Agent
}

func newWorld(t *testing.T) *world {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on loop devices")
	env := testenv.Get(t)
	w := &world{c: env.Client, ns: fmt.Sprintf("repl-%d-%d", os.Getpid(), counter.Add(1))}
	if err := w.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
		t.Fatal(err)
	}
	w.a, w.b = btrfsagent.Start(t, w.c, w.ns, "a"), btrfsagent.Start(t, w.c, w.ns, "b")
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		_, err := btrfsagent.SetUpReplication(mgr)
		return err
	})
	return w
}

func TestManualSyncsReplicateAgentToAgent(t *testing.T) {
	w := newWorld(t)
	w.a.Claim(t, w.c, w.ns, "db", "node-a")
	w.b.Claim(t, w.c, w.ns, "db-backup", "node-b")
	first := w.a.Write(t, "db", "first", 8*mib)
	volsynctest.Pair(t, w.c, volsyncv1alpha1.ProviderBtrfs, w.ns, "db", "db", "db-backup", "db-backup", "one")
	st := volsynctest.Synced(t, w.c, w.ns, "db", "one")
	if st.LatestMoverStatus == nil || st.LatestMoverStatus.Result != volsyncv1alpha1.MoverResultSuccessful ||
		st.LastSyncTime == nil || st.LastSyncDuration == nil || st.External["replica"] != "1" {
		t.Fatalf("after the first sync the source's status is %+v", st)
	}
	second := w.a.Write(t, "db", "second", 1*mib)
	volsynctest.SetManual(t, w.c, w.ns, "db", "two")
	st = volsynctest.Synced(t, w.c, w.ns, "db", "two")
	sent, _ := strconv.ParseInt(st.External["streamBytes"], 10, 64)
	t.Logf("second sync: %s", st.LatestMoverStatus.Logs)
	if st.External["replica"] != "2" || sent < 1*mib || sent > 2*mib {
		t.Fatalf("the second sync reported %v; want replica 2 with only the 1 MiB written since", st.External)
	}
	w.wantDestination(t, "db-backup", "2")

	// The backup's agent promotes the newest replica: the source's bytes.
	v, err := w.b.Store.Promote(context.Background(), tenant, w.ns+".db-backup")
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{"first": first, "second": second} {
		if got, err := os.ReadFile(filepath.Join(v.Path, file)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("promoted %s holds %d bytes (%v), want the %d the source wrote", file, len(got), err, len(data))
		}
	}
}

// wantDestination waits for the destination to report replica n and the
// claim it is for.
func (w *world) wantDestination(t *testing.T, name, n string) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		rd := &volsyncv1alpha1.ReplicationDestination{}
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, rd); err != nil {
			return err
		}
		if rd.Status == nil || rd.Status.External["replica"] != n || rd.Status.LatestImage == nil || rd.Status.LastSyncTime == nil {
			return fmt.Errorf("destination status %+v", rd.Status)
		}
		return nil
	})
}

// A pair whose two claims are on one node's agent, and a destination
// that names no claim, each get a clear condition and move nothing.
func TestBadPairsGetAClearCondition(t *testing.T) {
	w := newWorld(t)
	w.a.Claim(t, w.c, w.ns, "db", "node-a")
	w.a.Claim(t, w.c, w.ns, "db-same-node", "node-a")
	volsynctest.Pair(t, w.c, volsyncv1alpha1.ProviderBtrfs, w.ns, "db", "db", "db-backup", "db-same-node", "one")
	w.wantCondition(t, &volsyncv1alpha1.ReplicationSource{}, "db", "same agent")

	rd := &volsyncv1alpha1.ReplicationDestination{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "nameless"},
		Spec: volsyncv1alpha1.ReplicationDestinationSpec{External: &volsyncv1alpha1.ExternalSpec{Provider: volsyncv1alpha1.ProviderBtrfs}}}
	if err := w.c.Create(context.Background(), rd); err != nil {
		t.Fatal(err)
	}
	w.wantCondition(t, &volsyncv1alpha1.ReplicationDestination{}, "nameless", "destinationPVC is empty")
	if p, err := w.a.Store.GetPair(context.Background(), tenant, w.ns+".db-backup"); err != nil || p.Latest != 0 {
		t.Fatalf("the refused pair holds %+v, %v; want no replica", p, err)
	}
}

type conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
}

func (w *world) wantCondition(t *testing.T, obj conditioned, name, says string) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, obj); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(obj.GetConditions(), volsyncv1alpha1.ConditionSynchronizing)
		if c == nil || c.Reason != volsyncv1alpha1.SynchronizingReasonError || !strings.Contains(c.Message, says) {
			return fmt.Errorf("%s's Synchronizing condition is %+v, want an Error saying %q", name, c, says)
		}
		return nil
	})
}
