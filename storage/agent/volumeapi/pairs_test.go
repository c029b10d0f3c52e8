package volumeapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

const pairToken = "pair-token-0123456789abcdef0123456789"

// tlsAgent serves a store on a fresh btrfs over TLS, calling its peers
// with a client that trusts the test servers' certificate.
type tlsAgent struct {
	srv   *httptest.Server
	store *btrfsnode.Store
}

func pairedAgents(t *testing.T) (a, b tlsAgent) {
	t.Helper()
	ctx := context.Background()
	for _, ag := range []*tlsAgent{&a, &b} {
		_, ag.store = agentAndStore(t)
		tenants := &volumeapi.Tenants{}
		if err := tenants.Set(map[string]string{tenantA: tokenA, "team-b": tokenB}); err != nil {
			t.Fatal(err)
		}
		server := volumeapi.New(ag.store, tenants)
		ag.srv = httptest.NewTLSServer(server.Handler())
		server.PeerHTTP = ag.srv.Client()
		t.Cleanup(ag.srv.Close)
		c := client(ag.srv, tokenA)
		if _, err := c.CreateVolume(ctx, btrfsnode.CreateRequest{Name: "db", SizeBytes: 256 * mib}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetPair(ctx, "db-pair", wire.PairRequest{Volume: "db", Token: pairToken}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func (ag tlsAgent) write(t *testing.T, file string, size int) []byte {
	t.Helper()
	v, err := ag.store.Get(tenantA, "db")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if err := os.WriteFile(filepath.Join(v.Path, file), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func (ag tlsAgent) syncTo(peer tlsAgent, token string) (wire.Replica, error) {
	return client(ag.srv, tokenA).SyncPair(context.Background(), "db-pair",
		wire.SyncRequest{Peer: peer.srv.URL, PeerTenant: tenantA, Token: token})
}

func TestAgentsReplicateAgentToAgent(t *testing.T) {
	a, b := pairedAgents(t)
	first := a.write(t, "first", 8*mib)
	full, err := a.syncTo(b, pairToken)
	if err != nil {
		t.Fatal(err)
	}
	second := a.write(t, "second", 1*mib)
	delta, err := a.syncTo(b, pairToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync %+v; second %+v", full, delta)
	if full.Seq != 1 || full.StreamBytes < 8*mib || delta.Seq != 2 || delta.Parent != 1 || delta.StreamBytes > 2*mib {
		t.Fatalf("syncs %+v then %+v; want the whole volume, then the 1 MiB changed from replica 1", full, delta)
	}
	held, err := client(b.srv, tokenA).GetPair(context.Background(), "db-pair")
	if err != nil || held.Latest != 2 || held.LatestAt == nil || !held.LatestAt.Equal(delta.MadeAt) {
		t.Fatalf("the destination holds %+v (%v), want replica 2 made at %s", held, err, delta.MadeAt)
	}
	v, err := client(b.srv, tokenA).Promote(context.Background(), "db-pair")
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{"first": first, "second": second} {
		if got, err := os.ReadFile(filepath.Join(v.Path, file)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("promoted %s holds %d bytes (%v), want what the source wrote", file, len(got), err)
		}
	}
}

func TestReplicaRoutesTakeOnlyThePairsToken(t *testing.T) {
	a, b := pairedAgents(t)
	_, err := a.syncTo(b, "another-token-0123456789abcdef0123456789")
	if err == nil {
		t.Fatal("a sync with a token that is not the pair's reached the peer")
	}
	// A tenant's token is not a pair's token either.
	peer := &volumeapi.PeerClient{URL: b.srv.URL, Tenant: tenantA, Pair: "db-pair", Token: tokenA, HTTP: b.srv.Client()}
	_, err = peer.State(context.Background())
	wantStatus(t, err, http.StatusUnauthorized, "Unauthorized", "the replica route with a tenant's token")
	_, err = client(b.srv, tokenB).GetPair(context.Background(), "db-pair")
	wantStatus(t, err, http.StatusNotFound, "NotFound", "another tenant's pair")
}

func TestAStreamWithoutItsDigestIsRefused(t *testing.T) {
	a, b := pairedAgents(t)
	a.write(t, "first", 1*mib)
	out, err := a.store.SnapshotForSend(context.Background(), tenantA, "db-pair", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := out.Stream(context.Background(), &stream); err != nil {
		t.Fatal(err)
	}
	// A whole, valid stream, but no trailer vouches for it: a sender
	// whose btrfs send failed sends none.
	req, _ := http.NewRequest(http.MethodPut, b.srv.URL+"/v1/replicas/"+tenantA+"/db-pair/1", &stream)
	req.Header.Set("Authorization", "Bearer "+pairToken)
	req.Header.Set("Strata-Replica-Parent", "0")
	req.Header.Set("Strata-Replica-Made-At", time.Now().Format(time.RFC3339Nano))
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a stream without its digest got %s, want 400", resp.Status)
	}
	if p, err := b.store.GetPair(context.Background(), tenantA, "db-pair"); err != nil || p.Latest != 0 {
		t.Fatalf("after a refused stream the destination holds %+v, %v; want no replica", p, err)
	}
}

// A sync whose caller gives up halfway, as when the controller or the
// sending agent is killed, leaves the destination its previous replica
// and nothing half-received.
func TestASyncKilledHalfwayKeepsThePreviousReplica(t *testing.T) {
	a, b := pairedAgents(t)
	a.write(t, "first", 1*mib)
	if _, err := a.syncTo(b, pairToken); err != nil {
		t.Fatal(err)
	}
	a.write(t, "big", 200*mib)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := client(a.srv, tokenA).SyncPair(ctx, "db-pair", wire.SyncRequest{Peer: b.srv.URL, PeerTenant: tenantA, Token: pairToken})
	if err == nil {
		t.Fatal("a sync of 200 MiB finished within 100 ms: the test cannot cut it")
	}
	pairDir := filepath.Join(b.store.Base, tenantA, ".pairs", "db-pair")
	testenv.Eventually(t, time.Minute, func() error {
		p, err := b.store.GetPair(context.Background(), tenantA, "db-pair")
		if err != nil || p.Latest != 1 {
			return fmt.Errorf("the destination holds %+v, %v; want replica 1", p, err)
		}
		entries, err := os.ReadDir(pairDir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".part") {
				return fmt.Errorf("%s is left in the pair's directory", e.Name())
			}
		}
		return nil
	})
	// The next sync works, from replica 1.
	r, err := a.syncTo(b, pairToken)
	if err != nil || r.Parent != 1 {
		t.Fatalf("the sync after the killed one: %+v, %v; want one from replica 1", r, err)
	}
}
