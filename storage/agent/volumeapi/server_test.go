package volumeapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

const (
	mib     = 1 << 20
	tokenA  = "token-of-team-a-0123456789"
	tokenB  = "token-of-team-b-0123456789"
	tenantA = "team-a"
)

// agent serves a store on a fresh btrfs for two tenants.
func agent(t testing.TB) *httptest.Server {
	t.Helper()
	srv, _ := agentAndStore(t)
	return srv
}

func agentAndStore(t testing.TB) (*httptest.Server, *btrfsnode.Store) {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on a loop device")
	mnt := testenv.BtrfsDisk(t, 1<<30)
	store, err := btrfsnode.Open(context.Background(), filepath.Join(mnt, "strata"), nil, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{tenantA: tokenA, "team-b": tokenB}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(volumeapi.New(store, tenants).Handler())
	t.Cleanup(srv.Close)
	return srv, store
}

func client(srv *httptest.Server, token string) *volumeapi.Client {
	return &volumeapi.Client{URL: srv.URL, Token: token, HTTP: srv.Client()}
}

func wantStatus(t *testing.T, err error, status int, reason, what string) {
	t.Helper()
	if volumeapi.StatusOf(err) != status || volumeapi.ReasonOf(err) != reason {
		t.Fatalf("%s: %v, want %d %s", what, err, status, reason)
	}
}

func TestTokensAreRequiredAndTenantsKeptApart(t *testing.T) {
	ctx := context.Background()
	srv := agent(t)
	a, b := client(srv, tokenA), client(srv, tokenB)
	v, err := a.CreateVolume(ctx, btrfsnode.CreateRequest{Name: "db", SizeBytes: 16 * mib})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Path, "/"+tenantA+"/db/data") {
		t.Fatalf("volume path %s is not under the tenant's directory", v.Path)
	}
	_, err = client(srv, "not-a-token-of-anyone-at-all").ListVolumes(ctx)
	wantStatus(t, err, http.StatusUnauthorized, "Unauthorized", "a wrong token")
	_, err = client(srv, "").ListVolumes(ctx)
	wantStatus(t, err, http.StatusUnauthorized, "Unauthorized", "no token")

	_, err = b.GetVolume(ctx, "db")
	wantStatus(t, err, http.StatusNotFound, "NotFound", "another tenant's volume")
	wantStatus(t, b.DeleteVolume(ctx, "db", true), http.StatusNotFound, "NotFound", "deleting another tenant's volume")
	_, err = b.CreateSnapshot(ctx, btrfsnode.SnapshotRequest{Name: "steal", Volume: "db"})
	wantStatus(t, err, http.StatusNotFound, "NotFound", "a snapshot of another tenant's volume")
	_, err = b.Clone(ctx, btrfsnode.CloneRequest{Name: "steal", Source: btrfsnode.Source{Volume: "db"}})
	wantStatus(t, err, http.StatusNotFound, "NotFound", "a clone of another tenant's volume")
	if vs, err := b.ListVolumes(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("team-b lists %+v, %v; want nothing", vs, err)
	}
	// The same name in another tenant is another volume.
	if _, err := b.CreateVolume(ctx, btrfsnode.CreateRequest{Name: "db", SizeBytes: 32 * mib}); err != nil {
		t.Fatal(err)
	}
	if v, err := a.GetVolume(ctx, "db"); err != nil || v.SizeBytes != 16*mib {
		t.Fatalf("team-a's db after team-b made its own: %+v, %v", v, err)
	}
}

func TestBadInputGetsAClearStatus(t *testing.T) {
	ctx := context.Background()
	srv := agent(t)
	a := client(srv, tokenA)
	for _, tc := range []struct {
		req    btrfsnode.CreateRequest
		status int
		says   string
	}{
		{btrfsnode.CreateRequest{Name: "a/../../etc", SizeBytes: 16 * mib}, http.StatusBadRequest, `"/" at byte 1`},
		{btrfsnode.CreateRequest{Name: "small", SizeBytes: 1}, http.StatusBadRequest, "below the minimum"},
		{btrfsnode.CreateRequest{Name: "big", SizeBytes: 1 << 42}, http.StatusInsufficientStorage, "free"},
	} {
		_, err := a.CreateVolume(ctx, tc.req)
		if volumeapi.StatusOf(err) != tc.status || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("create %q: %v, want %d saying %q", tc.req.Name, err, tc.status, tc.says)
		}
	}
	// Path traversal in the URL never reaches the filesystem.
	for _, path := range []string{"/v1/volumes/..%2F..%2Fetc", "/v1/volumes/%2e%2e", "/v1/snapshots/a%00b"} {
		resp := request(t, srv, http.MethodGet, path, tokenA, "")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, resp.StatusCode)
		}
	}
	for body, says := range map[string]string{
		`{"name":"x","sizeBytes":16777216,"owner":"me"}`: "unknown field",
		`{"name":"x","sizeBytes":"big"}`:                 "cannot unmarshal",
		`{"name":"x","sizeBytes":16777216}{}`:            "more than one",
		strings.Repeat(" ", 70<<10) + "{}":               "over",
	} {
		resp := request(t, srv, http.MethodPost, "/v1/volumes", tokenA, body)
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), says) {
			t.Errorf("POST %.40q: %d %s, want 400 saying %q", body, resp.StatusCode, data, says)
		}
	}
	if vs, _ := a.ListVolumes(ctx); len(vs) != 0 {
		t.Fatalf("bad requests made volumes: %+v", vs)
	}
}

func request(t testing.TB, srv *httptest.Server, method, path, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestVolumeLifecycleOverHTTP(t *testing.T) {
	ctx := context.Background()
	srv := agent(t)
	a := client(srv, tokenA)
	resp := request(t, srv, http.MethodPost, "/v1/volumes", tokenA, `{"name":"v","sizeBytes":16777216,"compression":"zstd","compressionLevel":3}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	resp = request(t, srv, http.MethodPost, "/v1/volumes", tokenA, `{"name":"v","sizeBytes":16777216}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("repeated create: %d, want 200 with the volume made before", resp.StatusCode)
	}
	_, err := a.CreateVolume(ctx, btrfsnode.CreateRequest{Name: "v", SizeBytes: 32 * mib})
	wantStatus(t, err, http.StatusConflict, "Conflict", "create with another size")

	size := int64(64 * mib)
	if v, err := a.UpdateVolume(ctx, "v", btrfsnode.UpdateRequest{SizeBytes: &size}); err != nil || v.SizeBytes != size {
		t.Fatalf("expand: %+v, %v", v, err)
	}
	if _, err := a.CreateSnapshot(ctx, btrfsnode.SnapshotRequest{Name: "s", Volume: "v"}); err != nil {
		t.Fatal(err)
	}
	if snaps, err := a.ListSnapshots(ctx, "v"); err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots of v: %+v, %v", snaps, err)
	}
	if c, err := a.Clone(ctx, btrfsnode.CloneRequest{Name: "c", Source: btrfsnode.Source{Snapshot: "s"}}); err != nil || c.SizeBytes != size {
		t.Fatalf("clone: %+v, %v", c, err)
	}
	err = a.DeleteVolume(ctx, "v", false)
	wantStatus(t, err, http.StatusConflict, "InUse", "deleting a volume with a snapshot")
	if err := a.DeleteVolume(ctx, "v", true); err != nil {
		t.Fatal(err)
	}
	_, err = a.Clone(ctx, btrfsnode.CloneRequest{Name: "c2", Source: btrfsnode.Source{Snapshot: "s"}})
	wantStatus(t, err, http.StatusNotFound, "NotFound", "a clone of a deleted snapshot")
	_, err = a.CreateSnapshot(ctx, btrfsnode.SnapshotRequest{Name: "s2", Volume: "v"})
	wantStatus(t, err, http.StatusNotFound, "NotFound", "a snapshot of a deleted volume")
	_, err = a.AddExport(ctx, "c", "127.0.0.1")
	wantStatus(t, err, http.StatusBadRequest, "Invalid", "an export on an agent without an exporter")

	st, err := a.Stats(ctx)
	if err != nil || st.Filesystem.Size <= 0 || st.Filesystem.Free <= 0 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	if resp := request(t, srv, http.MethodGet, "/v1/health", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	metrics, _ := io.ReadAll(request(t, srv, http.MethodGet, "/v1/metrics", "", "").Body)
	for _, want := range []string{`strata_agent_http_requests_total{code="409",route="DELETE /v1/volumes/{name}"} 1`, "strata_agent_filesystem_free_bytes"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestConcurrentCreatesOverHTTP(t *testing.T) {
	srv := agent(t)
	var wg sync.WaitGroup
	codes := make(chan int, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/volumes", bytes.NewBufferString(`{"name":"race","sizeBytes":16777216}`))
			req.Header.Set("Authorization", "Bearer "+tokenA)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusCreated] != 1 || count[http.StatusOK] != 5 {
		t.Fatalf("status codes %v; want one 201 and five 200 with the same volume", count)
	}
}

// FuzzCreateBody posts arbitrary bodies: the API answers every one with
// a success or a 4xx/507, never a 500, and a refused body makes nothing.
func FuzzCreateBody(f *testing.F) {
	for _, seed := range []string{
		`{"name":"ok","sizeBytes":16777216}`, `{"name":"../x","sizeBytes":16777216}`, `{"name":"a","sizeBytes":-1}`,
		`{"name":"b","sizeBytes":16777216,"mode":"9999"}`, `{"name":"c","sizeBytes":16777216,"uid":-5}`, `[]`, `null`, `{`, "",
		`{"name":"d","sizeBytes":16777216,"compression":"zlib","compressionLevel":10}`, `{"name":"\u0000","sizeBytes":1}`,
	} {
		f.Add(seed)
	}
	srv := agent(f)
	a := client(srv, tokenA)
	f.Fuzz(func(t *testing.T, body string) {
		before, err := a.ListVolumes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		resp := request(t, srv, http.MethodPost, "/v1/volumes", tokenA, body)
		data, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
			_ = a.DeleteVolume(context.Background(), nameOf(t, a, before), true)
		case resp.StatusCode >= 500 && resp.StatusCode != http.StatusInsufficientStorage:
			t.Fatalf("POST %q: %d %s", body, resp.StatusCode, data)
		default:
			after, _ := a.ListVolumes(context.Background())
			if len(after) != len(before) {
				t.Fatalf("POST %q was refused (%d) but changed the volumes", body, resp.StatusCode)
			}
		}
	})
}

// nameOf finds the volume a fuzzed create made, to remove it again.
func nameOf(t *testing.T, a *volumeapi.Client, before []btrfsnode.Volume) string {
	after, err := a.ListVolumes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, v := range before {
		old[v.Name] = true
	}
	for _, v := range after {
		if !old[v.Name] {
			return v.Name
		}
	}
	return ""
}

// An internal failure is logged; the answer names no host path, command
// or stderr, and a tenant's stats show no device of the host.
func TestAnswersLeakNothingOfTheHost(t *testing.T) {
	ctx := context.Background()
	srv, store := agentAndStore(t)
	a := client(srv, tokenA)
	if _, err := a.CreateVolume(ctx, btrfsnode.CreateRequest{Name: "db", SizeBytes: 16 * mib}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "/dev/") || strings.Contains(string(body), "devices") ||
		!strings.Contains(string(body), "freeBytes") {
		t.Fatalf("stats = %d %s; want the tenant's figures and the free space, no host device", resp.StatusCode, body)
	}
	if err := os.WriteFile(filepath.Join(store.Base, tenantA, "db", "metadata.json"), []byte("{damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = a.GetVolume(ctx, "db")
	wantStatus(t, err, http.StatusInternalServerError, "Internal", "a volume with damaged metadata")
	if strings.Contains(err.Error(), store.Base) || strings.Contains(err.Error(), "metadata.json") {
		t.Fatalf("the 500 answer shows the host's paths: %v", err)
	}
}

// A tenant may open its volumes only to what the admin allows: single
// addresses by default, its listed networks when there are any.
func TestTenantsExportOnlyToTheirNetworks(t *testing.T) {
	networks, err := volumeapi.ParseNetworks("team-a:10.1.0.0/16, team-a:fd00::/64")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, client string
		ok             bool
	}{
		{"team-a", "10.1.2.3", true},
		{"team-a", "10.1.2.0/24", true},
		{"team-a", "fd00::5", true},
		{"team-a", "10.2.0.1", false},
		{"team-a", "10.0.0.0/8", false},
		{"team-a", "0.0.0.0/0", false},
		{"team-b", "192.168.1.7", true},
		{"team-b", "192.168.1.0/24", false},
		{"team-b", "0.0.0.0/0", false},
	} {
		err := networks.Allow(tc.tenant, tc.client)
		if (err == nil) != tc.ok || (err != nil && contract.KindOf(err) != contract.Forbidden) {
			t.Errorf("Allow(%s, %s) = %v, want allowed %v", tc.tenant, tc.client, err, tc.ok)
		}
	}
	for _, bad := range []string{"team-a", "team-a:10.1.0.0", "team a:10.0.0.0/8"} {
		if _, err := volumeapi.ParseNetworks(bad); err == nil {
			t.Errorf("ParseNetworks(%q) accepted it", bad)
		}
	}
}
