package volumeapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// guardedAgent serves a store over TLS, with the server's bound on
// requests as httpserver serves it, and syncs only to 127.0.0.1: the one
// node of its cluster.
func guardedAgent(t *testing.T) (*httptest.Server, *volumeapi.Client) {
	t.Helper()
	_, store := agentAndStore(t)
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{tenantA: tokenA, "team-b": tokenB}); err != nil {
		t.Fatal(err)
	}
	server := volumeapi.New(store, tenants)
	server.Peers.Hosts = func(context.Context) (map[string]bool, error) { return map[string]bool{"127.0.0.1": true}, nil }
	srv := httptest.NewTLSServer(httpserver.LimitInFlight(server.Handler(), httpserver.MaxInFlight))
	server.PeerHTTP = srv.Client()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	for _, token := range []string{tokenB, tokenA} {
		c := client(srv, token)
		if _, err := c.CreateVolume(ctx, btrfsnode.CreateRequest{Name: "db", SizeBytes: 64 * mib}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetPair(ctx, "db-pair", wire.PairRequest{Volume: "db", Token: pairToken}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, client(srv, tokenA)
}

// A tenant names the peer of a sync; the agent calls only another
// agent's https:// base URL at a node's address, and nothing else is
// ever dialled.
func TestASyncCallsOnlyAnAgentOfTheCluster(t *testing.T) {
	_, c := guardedAgent(t)
	listener := testenv.CountDials(t)
	port := listener.Port
	for _, peer := range []string{
		"http://127.0.0.1:" + strconv.Itoa(port),
		"https://localhost:" + strconv.Itoa(port),
		"https://10.0.0.1:" + strconv.Itoa(port),
		"https://user:pass@127.0.0.1:" + strconv.Itoa(port),
		"https://127.0.0.1:" + strconv.Itoa(port) + "/latest/meta-data",
		"file:///etc/passwd",
	} {
		_, err := c.SyncPair(context.Background(), "db-pair", wire.SyncRequest{Peer: peer, PeerTenant: tenantA, Token: pairToken})
		wantStatus(t, err, http.StatusBadRequest, "Invalid", "a sync to "+peer)
	}
	if n := listener.Dials(); n != 0 {
		t.Fatalf("the agent dialled the refused peers %d times", n)
	}
}

// Syncs to a peer that never answers hold stream slots, not the
// server's requests: as many of them as the server takes requests leave
// the volume API answering, and the syncs over the tenant's share of the
// budget are told to come back. Another tenant's sync still gets a slot.
func TestHangingSyncsLeaveTheVolumeAPIServed(t *testing.T) {
	srv, c := guardedAgent(t)
	release := make(chan struct{})
	var arrived atomic.Int32
	hanging := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	var busy atomic.Int32
	var wg sync.WaitGroup
	for range httpserver.MaxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.WithoutTimeout().SyncPair(context.Background(), "db-pair",
				wire.SyncRequest{Peer: hanging.URL, PeerTenant: tenantA, Token: pairToken})
			if volumeapi.StatusOf(err) == http.StatusServiceUnavailable && volumeapi.ReasonOf(err) == "Busy" {
				busy.Add(1)
			}
		}()
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if a, b := arrived.Load(), busy.Load(); a != volumeapi.MaxStreamsPerTenant || int(b) != httpserver.MaxInFlight-volumeapi.MaxStreamsPerTenant {
			return fmt.Errorf("%d syncs reached the peer and %d were told the agent is busy", a, b)
		}
		return nil
	})
	if _, err := c.GetVolume(context.Background(), "db"); err != nil {
		t.Fatalf("the volume API while syncs hang: %v", err)
	}
	// team-a holds its whole share; team-b's sync is not turned away.
	other := make(chan error, 1)
	go func() {
		_, err := client(srv, tokenB).WithoutTimeout().SyncPair(context.Background(), "db-pair",
			wire.SyncRequest{Peer: hanging.URL, PeerTenant: "team-b", Token: pairToken})
		other <- err
	}()
	testenv.Eventually(t, 20*time.Second, func() error {
		select {
		case err := <-other:
			t.Fatalf("another tenant's sync while team-a holds its share: %v; want it to reach the peer", err)
		default:
		}
		if a := arrived.Load(); a != volumeapi.MaxStreamsPerTenant+1 {
			return fmt.Errorf("%d syncs reached the peer", a)
		}
		return nil
	})
	close(release)
	wg.Wait()
	if err := <-other; volumeapi.ReasonOf(err) == "Busy" {
		t.Fatalf("team-b's sync was turned away: %v", err)
	}
}

// The replica routes' tenant segment names a directory: an escaped
// slash or a dot-dot in it is refused before the store is asked.
func TestAReplicaRouteRefusesATenantThatIsNoName(t *testing.T) {
	srv, _ := guardedAgent(t)
	for _, tenant := range []string{"team-a%2F.pairs%2Fdb-pair", "%2E%2E", "team-a%2F..%2Fteam-b", ".pairs"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/replicas/"+tenant+"/db-pair", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+pairToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /v1/replicas/%s/db-pair = %d, want 400", tenant, resp.StatusCode)
		}
	}
}
