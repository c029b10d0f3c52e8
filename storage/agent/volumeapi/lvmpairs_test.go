package volumeapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/thingroup"
	"github.com/strata-gitops/strata/storage/agent/lvmpairs"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/lvm"
)

// lvmAgent serves the LVM mover's pairs of one node over TLS.
type lvmAgent struct {
	srv *httptest.Server
	lvm lvm.Manager
	vg  string
}

func lvmAgents(t *testing.T) (a, b lvmAgent) {
	t.Helper()
	ctx := context.Background()
	for i, ag := range []*lvmAgent{&a, &b} {
		ag.vg = "strata-api-lvm-" + string(rune('a'+i))
		ag.lvm = thingroup.New(t, ag.vg, 128*mib, 96*mib)
		if err := ag.lvm.CreateVolume(ctx, ag.vg, lvm.VolumeSpec{Name: "db", Size: 16 * mib, Pool: thingroup.Pool}); err != nil {
			t.Fatal(err)
		}
		tenants := &volumeapi.Tenants{}
		if err := tenants.Set(map[string]string{tenantA: tokenA}); err != nil {
			t.Fatal(err)
		}
		server := volumeapi.NewPairServer(&lvmpairs.Store{LVM: ag.lvm, Dir: t.TempDir()}, tenants)
		ag.srv = httptest.NewTLSServer(server.Handler())
		server.PeerHTTP = ag.srv.Client()
		t.Cleanup(ag.srv.Close)
		if _, err := client(ag.srv, tokenA).SetPair(ctx, "db-pair", wire.PairRequest{Volume: ag.vg + "/db", Token: pairToken}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func (ag lvmAgent) device(t *testing.T, volume string, flag int) *os.File {
	t.Helper()
	dev, err := ag.lvm.DevicePath(context.Background(), ag.vg, volume)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dev, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func (ag lvmAgent) write(t *testing.T, off int64, size int) {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	f := ag.device(t, "db", os.O_WRONLY)
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func (ag lvmAgent) read(t *testing.T, volume string) []byte {
	t.Helper()
	data := make([]byte, 16*mib)
	if _, err := ag.device(t, volume, os.O_RDONLY).ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data
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
	a.write(t, 0, 4*mib)
	first, err := a.syncTo(b)
	if err != nil {
		t.Fatal(err)
	}
	a.write(t, 8*mib, 1*mib)
	second, err := a.syncTo(b)
	if err != nil {
		t.Fatal(err)
	}
	if second.Parent != first.Seq || second.StreamBytes > 1*mib+64<<10 {
		t.Errorf("the second sync was replica %d from %d with %d stream bytes; want a delta of about 1 MiB from %d",
			second.Seq, second.Parent, second.StreamBytes, first.Seq)
	}
	held, err := client(b.srv, tokenA).GetPair(ctx, "db-pair")
	if err != nil || held.Latest != second.Seq || held.Volume != b.vg+"/db" {
		t.Fatalf("the backup's pair: %+v, %v", held, err)
	}
	if _, err := client(b.srv, tokenA).Promote(ctx, "db-pair"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.read(t, "db"), a.read(t, "db")) {
		t.Fatal("the promoted backup does not hold the primary's data")
	}

	if _, err := client(a.srv, tokenA).Fence(ctx, "db-pair"); err != nil {
		t.Fatal(err)
	}
	b.write(t, 12*mib, 1*mib)
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
	if !bytes.Equal(a.read(t, "db"), b.read(t, "db")) {
		t.Error("after failback the primary does not hold what the backup wrote")
	}
}
