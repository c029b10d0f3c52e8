package volumeapi_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/lvmagent"
	"github.com/strata-gitops/strata/internal/testing/thingroup"
	"github.com/strata-gitops/strata/storage/agent/lvmnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/lvm"
)

// lvmAgent serves the LVM mover's pairs of one node over TLS; its volumes
// are written and read as lvmagent's are.
type lvmAgent struct {
	lvmagent.Agent
	srv *httptest.Server
}

func lvmAgents(t *testing.T) (a, b lvmAgent) {
	t.Helper()
	ctx := context.Background()
	for i, ag := range []*lvmAgent{&a, &b} {
		ag.Group = "strata-api-lvm-" + string(rune('a'+i))
		ag.LVM = thingroup.New(t, ag.Group, 128*mib, 96*mib)
		if err := ag.LVM.CreateVolume(ctx, ag.Group, lvm.VolumeSpec{Name: "db", Size: 16 * mib, Pool: thingroup.Pool, Tags: []string{storagev1alpha1.LogicalVolumeTag("db")}}); err != nil {
			t.Fatal(err)
		}
		tenants := &volumeapi.Tenants{}
		if err := tenants.Set(map[string]string{tenantA: tokenA}); err != nil {
			t.Fatal(err)
		}
		server := volumeapi.NewPairServer(&lvmnode.Store{LVM: ag.LVM, Dir: t.TempDir()}, tenants)
		ag.srv = httptest.NewTLSServer(server.Handler())
		server.PeerHTTP = ag.srv.Client()
		t.Cleanup(ag.srv.Close)
		if _, err := client(ag.srv, tokenA).SetPair(ctx, "db-pair", wire.PairRequest{Volume: ag.Group + "/db", Token: pairToken}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func (ag lvmAgent) syncTo(peer lvmAgent) (wire.Replica, error) {
	return client(ag.srv, tokenA).SyncPair(context.Background(), "db-pair",
		wire.SyncRequest{Peer: peer.srv.URL, PeerTenant: tenantA, Token: pairToken})
}

// The node agent's pair routes serve LVM thin volumes as they serve
// btrfs ones: a sync goes agent to agent over TLS as a block delta, a
// promotion serves the replica, and failback sends back only what the
// backup wrote.
func TestLVMVolumesReplicateAgentToAgent(t *testing.T) {
	a, b := lvmAgents(t)
	ctx := context.Background()
	a.Write(t, "db", 0, 4*mib)
	first, err := a.syncTo(b)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(t, "db", 8*mib, 1*mib)
	second, err := a.syncTo(b)
	if err != nil {
		t.Fatal(err)
	}
	if second.Parent != first.Seq || second.StreamBytes > 1*mib+64<<10 {
		t.Errorf("the second sync was replica %d from %d with %d stream bytes; want a delta of about 1 MiB from %d",
			second.Seq, second.Parent, second.StreamBytes, first.Seq)
	}
	held, err := client(b.srv, tokenA).GetPair(ctx, "db-pair")
	if err != nil || held.Latest != second.Seq || held.Volume != b.Group+"/db" {
		t.Fatalf("the backup's pair: %+v, %v", held, err)
	}
	if _, err := client(b.srv, tokenA).Promote(ctx, "db-pair"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Read(t, "db", 0, 16*mib), a.Read(t, "db", 0, 16*mib)) {
		t.Fatal("the promoted backup does not hold the primary's data")
	}

	if _, err := client(a.srv, tokenA).Fence(ctx, "db-pair"); err != nil {
		t.Fatal(err)
	}
	b.Write(t, "db", 12*mib, 1*mib)
	back, err := b.syncTo(a)
	if err != nil {
		t.Fatal(err)
	}
	if back.Parent != second.Seq || back.StreamBytes > 1*mib+64<<10 {
		t.Errorf("failback was replica %d from %d with %d stream bytes; want a delta of about 1 MiB from %d", back.Seq, back.Parent, back.StreamBytes, second.Seq)
	}
	if _, err := client(a.srv, tokenA).Promote(ctx, "db-pair"); err != nil {
		t.Fatal(err)
	}
	if p, err := client(a.srv, tokenA).GetPair(ctx, "db-pair"); err != nil || p.Fenced {
		t.Errorf("the primary after its promotion: %+v, %v; want it writable", p, err)
	}
	if !bytes.Equal(a.Read(t, "db", 0, 16*mib), b.Read(t, "db", 0, 16*mib)) {
		t.Error("after failback the primary does not hold what the backup wrote")
	}
}
