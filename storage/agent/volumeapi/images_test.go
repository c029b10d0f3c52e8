package volumeapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/imageagent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// imageAgent serves the volume API with image jobs for two tenants; it
// returns the server and the image's URL.
func imageAgent(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	a := imageagent.Start(t, map[string]string{tenantA: tokenA, "team-b": tokenB})
	return a.Srv, a.Image
}

// answer reads a response's status and JSON body.
func answer(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	body := map[string]any{}
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &body); err != nil {
			t.Fatalf("%s: %q is not JSON", resp.Request.URL.Path, data)
		}
	}
	return resp.StatusCode, body
}

// The old API's routes, driven with the bodies its documentation shows.
func TestTheProvisionerAPIKeepsItsRoutes(t *testing.T) {
	srv, image := imageAgent(t)
	body := fmt.Sprintf(`{"image_url": %q, "volume_name": "itx-master-controlplane-1", "volume_size_gb": 1, "image_type": "qcow2", "correlation_id": "provision-vm-001"}`, image)

	if code, got := answer(t, request(t, srv, http.MethodPost, "/api/v1/provision", "", body)); code != http.StatusUnauthorized || got["error"] != "unauthorized" {
		t.Fatalf("no token: %d %v; want 401, no fallback", code, got)
	}
	code, got := answer(t, request(t, srv, http.MethodPost, "/api/v1/provision", tokenA, body))
	id, _ := got["job_id"].(string)
	if code != http.StatusCreated || id == "" {
		t.Fatalf("POST /api/v1/provision: %d %v; want 201 with a job_id", code, got)
	}
	var job map[string]any
	testenv.Eventually(t, time.Minute, func() error {
		_, job = answer(t, request(t, srv, http.MethodGet, "/api/v1/status/"+id, tokenA, ""))
		if job["status"] != "completed" {
			return fmt.Errorf("job %v", job)
		}
		return nil
	})
	wantCompleted(t, job, id)
	wantRefusals(t, srv, id, body)
	wantListsHealthAndMetrics(t, srv)
}

// wantCompleted checks a completed job's status fields.
func wantCompleted(t *testing.T, job map[string]any, id string) {
	t.Helper()
	progress, _ := job["progress"].(map[string]any)
	if job["job_id"] != id || job["correlation_id"] != "provision-vm-001" || job["cache_hit"] != false || job["image_path"] == "" ||
		progress["stage"] != "finalizing" || progress["percent"] != float64(100) || progress["bytes_total"] == float64(0) ||
		progress["bytes_processed"] != progress["bytes_total"] {
		t.Fatalf("GET /api/v1/status: %v", job)
	}
}

// wantRefusals checks the old API's error codes and bodies.
func wantRefusals(t *testing.T, srv *httptest.Server, id, body string) {
	t.Helper()
	for _, c := range []struct {
		method, path, token, body string
		code                      int
		error                     string
	}{
		{http.MethodGet, "/api/v1/status/" + id, tokenB, "", http.StatusNotFound, "not found"}, // another tenant's job
		{http.MethodDelete, "/api/v1/cancel/" + id, tokenA, "", http.StatusBadRequest, "invalid request"},
		{http.MethodDelete, "/api/v1/cancel/0000", tokenA, "", http.StatusNotFound, "not found"},
		{http.MethodPost, "/api/v1/provision", tokenA, strings.Replace(body, `"volume_size_gb": 1`, `"volume_size_gb": 0`, 1), http.StatusBadRequest, "invalid request"},
		{http.MethodPost, "/api/v1/provision", tokenA, "{not json", http.StatusBadRequest, "invalid request"},
	} {
		if code, got := answer(t, request(t, srv, c.method, c.path, c.token, c.body)); code != c.code || got["error"] != c.error || got["details"] == "" {
			t.Errorf("%s %s: %d %v; want %d %q with details", c.method, c.path, code, got, c.code, c.error)
		}
	}
}

// wantListsHealthAndMetrics checks the job list, the health routes and
// the old API's metrics.
func wantListsHealthAndMetrics(t *testing.T, srv *httptest.Server) {
	t.Helper()

	if code, got := answer(t, request(t, srv, http.MethodGet, "/api/v1/jobs", tokenA, "")); code != http.StatusOK || got["count"] != float64(1) {
		t.Errorf("GET /api/v1/jobs: %d %v; want the one job", code, got)
	}
	if _, got := answer(t, request(t, srv, http.MethodGet, "/api/v1/jobs", tokenB, "")); got["count"] != float64(0) {
		t.Errorf("another tenant lists %v", got)
	}
	if code, got := answer(t, request(t, srv, http.MethodGet, "/healthz", "", "")); code != http.StatusOK || got["status"] != "healthy" {
		t.Errorf("GET /healthz: %d %v", code, got)
	}
	metrics, _ := io.ReadAll(request(t, srv, http.MethodGet, "/v1/metrics", "", "").Body)
	for _, want := range []string{`libvirt_volume_provisioner_jobs_total{status="completed"} 1`, "libvirt_volume_provisioner_active_jobs 0",
		`libvirt_volume_provisioner_requests_total{endpoint="/api/v1/provision",method="POST",status="201"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestAnIdempotencyKeyReturnsTheFirstJob(t *testing.T) {
	srv, image := imageAgent(t)
	body := fmt.Sprintf(`{"image_url": %q, "volume_name": "vm-once", "volume_size_gb": 1, "image_type": "qcow2"}`, image)
	send := func() (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/provision", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokenA)
		req.Header.Set("Idempotency-Key", "install-vm-once")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		code, got := answer(t, resp)
		id, _ := got["job_id"].(string)
		return code, id
	}
	firstCode, first := send()
	againCode, again := send()
	if firstCode != http.StatusCreated || againCode != http.StatusOK || first == "" || again != first {
		t.Fatalf("the same key twice: %d %s, then %d %s; want 201 then 200 with the same job", firstCode, first, againCode, again)
	}
}
