package volumeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/storage/images/provision"
)

// The image routes are libvirt-volume-provisioner's, with its bodies,
// status codes and error shape, so that its clients keep working; they
// take the same tenant tokens as the rest of the API (docs/images.md).

// imageError is the old API's error body.
type imageError struct {
	Error   string `json:"error"`
	Details string `json:"details"`
}

// imageRoutes serves the image jobs of s.Images, each for the tenant of
// the request's token.
func (s *Server) imageRoutes(mux *http.ServeMux) {
	for _, path := range []string{"GET /health", "GET /healthz", "GET /livez"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
		})
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "libvirt_volume_provisioner_requests_total",
		Help: "Image API requests by endpoint, method and status code."}, []string{"endpoint", "method", "status"})
	s.metrics.registry.MustRegister(requests, s.imageJobMetrics())
	routes := map[string]func(http.ResponseWriter, *http.Request, string){
		"POST /api/v1/provision":         s.provision,
		"GET /api/v1/status/{job_id}":    s.jobStatus,
		"DELETE /api/v1/cancel/{job_id}": s.cancelJob,
		"GET /api/v1/jobs":               s.listJobs,
	}
	for pattern, h := range routes {
		_, endpoint, _ := strings.Cut(pattern, " ")
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httpserver.NewStatusRecorder(w)
			s.imageTenant(h).ServeHTTP(rec, r)
			requests.WithLabelValues(endpoint, r.Method, fmt.Sprint(rec.Status)).Inc()
		}))
	}
}

// imageTenant runs h for the tenant of the request's bearer token: no
// token, no access, and no fallback token.
func (s *Server) imageTenant(h func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return s.withTenant(h, func(w http.ResponseWriter) {
		writeJSON(w, http.StatusUnauthorized, imageError{Error: "unauthorized", Details: "a valid tenant token is required: send Authorization: Bearer <token>"})
	})
}

// imageJobMetrics are the jobs on record by state, and those running.
func (s *Server) imageJobMetrics() prometheus.Collector {
	return imageJobCollector{p: s.Images}
}

func (s *Server) provision(w http.ResponseWriter, r *http.Request, tenant string) {
	var req provision.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, imageError{Error: "invalid request", Details: "the body is not a provision request: " + err.Error()})
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" && req.IdempotencyKey == "" {
		req.IdempotencyKey = key
	}
	job, existing, err := s.Images.Submit(tenant, req)
	if errors.Is(err, provision.ErrTooManyJobs) {
		writeJSON(w, http.StatusTooManyRequests, imageError{Error: "too many jobs", Details: err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, imageError{Error: "invalid request", Details: err.Error()})
		return
	}
	code := http.StatusCreated
	if existing {
		code = http.StatusOK // the job the same idempotency key started
	}
	writeJSON(w, code, map[string]string{"job_id": job.ID})
}

func (s *Server) jobStatus(w http.ResponseWriter, r *http.Request, tenant string) {
	job, err := s.Images.Get(tenant, r.PathValue("job_id"))
	if err != nil {
		writeJSON(w, http.StatusNotFound, imageError{Error: "not found", Details: "job not found"})
		return
	}
	writeJSON(w, http.StatusOK, job)
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, tenant string) {
	_, err := s.Images.Cancel(tenant, r.PathValue("job_id"))
	switch {
	case errors.Is(err, provision.ErrNotFound):
		writeJSON(w, http.StatusNotFound, imageError{Error: "not found", Details: "job not found"})
	case err != nil:
		writeJSON(w, http.StatusBadRequest, imageError{Error: "invalid request", Details: err.Error()})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) listJobs(w http.ResponseWriter, _ *http.Request, tenant string) {
	jobs := s.Images.List(tenant)
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs, "count": len(jobs)})
}

// imageJobCollector reads the provisioner's jobs when scraped.
type imageJobCollector struct{ p *provision.Provisioner }

var (
	jobsTotal = prometheus.NewDesc("libvirt_volume_provisioner_jobs_total",
		"Image jobs on record: started (all), and by how they ended (completed, failed, cancelled).", []string{"status"}, nil)
	activeJobs = prometheus.NewDesc("libvirt_volume_provisioner_active_jobs", "Image jobs running now.", nil, nil)
)

func (c imageJobCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsTotal; ch <- activeJobs }

func (c imageJobCollector) Collect(ch chan<- prometheus.Metric) {
	counts, started := c.p.Counts(), 0
	for _, n := range counts {
		started += n
	}
	ch <- prometheus.MustNewConstMetric(jobsTotal, prometheus.CounterValue, float64(started), "started")
	for _, st := range []provision.State{provision.Completed, provision.Failed, provision.Cancelled} {
		ch <- prometheus.MustNewConstMetric(jobsTotal, prometheus.CounterValue, float64(counts[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(activeJobs, prometheus.GaugeValue, float64(counts[provision.Running]))
}
