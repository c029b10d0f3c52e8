// Package volumeapi is the storage agent's HTTP API over the btrfs
// volume store: volumes, snapshots, clones and NFS exports under /v1,
// every route scoped to the tenant of the caller's bearer token, plus
// the Go client the CSI driver uses. See docs/btrfs.md for the routes.
package volumeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/images/provision"
)

// maxBody bounds a request body; every request is a small JSON object.
const maxBody = 64 << 10

// Server serves the API.
type Server struct {
	// Volumes serves the volume routes; nil serves none (NewPairServer).
	Volumes contract.Volumes
	// Pairs serves the pair and replica routes: the btrfs backend's, or
	// the LVM backend's.
	Pairs   contract.Pairs
	Tenants *Tenants
	// Networks bound the NFS clients each tenant may export to.
	Networks Networks
	// PeerHTTP calls other agents when this one sends a replica; nil
	// uses http.DefaultClient.
	PeerHTTP *http.Client
	// Peers says which agents a sync may send to.
	Peers PeerPolicy
	// Controller, when set, is the only caller of the pair routes (a
	// node agent's): strata's controller, by its service account token.
	Controller *ControllerCaller
	streams    *streamBudget
	// Images, when set, serves image jobs on libvirt-volume-provisioner's
	// routes (docs/images.md).
	Images  *provision.Provisioner
	metrics *metrics
}

// New returns a server of a backend's volumes and pairs for the given
// tenants.
func New(store contract.Store, tenants *Tenants) *Server {
	return &Server{Volumes: store, Pairs: store, Tenants: tenants, metrics: newMetrics(store), streams: &streamBudget{}}
}

// NewPairServer serves only the pair and replica routes, and health and
// metrics, of a backend's pairs: the node agent's API for the LVM mover.
func NewPairServer(pairs contract.Pairs, tenants *Tenants) *Server {
	return &Server{Pairs: pairs, Tenants: tenants, metrics: newMetrics(nil), streams: &streamBudget{}}
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.health)
	mux.Handle("GET /v1/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	for pattern, h := range s.pairRoutes() {
		mux.Handle(pattern, s.metrics.instrument(pattern, s.pairCaller(h)))
	}
	if s.Volumes != nil {
		for pattern, h := range s.volumeRoutes() {
			mux.Handle(pattern, s.metrics.instrument(pattern, s.authenticated(h)))
		}
	}
	for pattern, h := range s.peerRoutes() {
		mux.Handle(pattern, s.metrics.instrument(pattern, h))
	}
	if s.Images != nil {
		s.imageRoutes(mux)
	}
	return mux
}

// volumeRoutes are the btrfs store's routes: volumes, snapshots, clones
// and exports.
func (s *Server) volumeRoutes() map[string]func(w http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	return map[string]func(w http.ResponseWriter, r *http.Request, tenant string) (int, any, error){
		"POST /v1/volumes":                              s.createVolume,
		"GET /v1/volumes":                               s.listVolumes,
		"GET /v1/volumes/{name}":                        s.getVolume,
		"PATCH /v1/volumes/{name}":                      s.updateVolume,
		"DELETE /v1/volumes/{name}":                     s.deleteVolume,
		"GET /v1/volumes/{name}/snapshots":              s.listVolumeSnapshots,
		"GET /v1/volumes/{name}/exports":                s.listExports,
		"POST /v1/volumes/{name}/exports":               s.addExport,
		"DELETE /v1/volumes/{name}/exports/{client...}": s.removeExport,
		"POST /v1/snapshots":                            s.createSnapshot,
		"GET /v1/snapshots":                             s.listSnapshots,
		"GET /v1/snapshots/{name}":                      s.getSnapshot,
		"DELETE /v1/snapshots/{name}":                   s.deleteSnapshot,
		"POST /v1/clones":                               s.clone,
		"GET /v1/stats":                                 s.stats,
	}
}

// authenticated runs h for the tenant of the request's bearer token and
// writes what it returns as JSON.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request, string) (int, any, error)) http.Handler {
	return s.withTenant(func(w http.ResponseWriter, r *http.Request, tenant string) { s.answer(w, r, tenant, h) },
		func(w http.ResponseWriter) {
			writeJSON(w, http.StatusUnauthorized, errorBody{Reason: "Unauthorized",
				Error: "a valid tenant token is required: send Authorization: Bearer <token>"})
		})
}

// pairCaller authenticates the pair routes: as strata's controller,
// by its reviewed service account token, when the server has a
// Controller (a node agent), or else as a tenant.
func (s *Server) pairCaller(h func(http.ResponseWriter, *http.Request, string) (int, any, error)) http.Handler {
	if s.Controller == nil {
		return s.authenticated(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tenant, ok, err := s.Controller.Authenticate(r.Context(), token)
		switch {
		case err != nil:
			log.Log.WithName("volume-api").Error(err, "authenticating a pair call")
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Reason: "Unavailable",
				Error: "the agent cannot reach the Kubernetes API to check the caller's token; retry"})
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata-agent"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Reason: "Unauthorized",
				Error: "a node agent's pair routes take only strata's controller, by its service account token for audience " + Audience + ":<this node>"})
		default:
			s.answer(w, r, tenant, h)
		}
	})
}

// withTenant runs h for the tenant of the request's bearer token, and
// has refuse answer a request without a known one.
func (s *Server) withTenant(h func(http.ResponseWriter, *http.Request, string), refuse func(http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tenant, known := s.Tenants.Lookup(token)
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata-agent"`)
			refuse(w)
			return
		}
		h(w, r, tenant)
	})
}

// answer runs h for the tenant and writes what it returns as JSON.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, tenant string, h func(http.ResponseWriter, *http.Request, string) (int, any, error)) {
	code, body, err := h(w, r, tenant)
	if err != nil {
		code, body = errorResponse(err)
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		if code == http.StatusInternalServerError {
			// Command lines, stderr and host paths stay in the log.
			log.Log.WithName("volume-api").Error(err, "request failed", "tenant", tenant, "method", r.Method, "path", r.URL.Path)
		}
	}
	if body == nil {
		w.WriteHeader(code)
		return
	}
	writeJSON(w, code, body)
}

type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// errorResponse maps a store error to a status code.
func errorResponse(err error) (int, errorBody) {
	codes := map[contract.Kind]struct {
		status int
		reason string
	}{
		contract.Invalid:   {http.StatusBadRequest, "Invalid"},
		contract.NotFound:  {http.StatusNotFound, "NotFound"},
		contract.Conflict:  {http.StatusConflict, "Conflict"},
		contract.InUse:     {http.StatusConflict, "InUse"},
		contract.NoSpace:   {http.StatusInsufficientStorage, "NoSpace"},
		contract.Forbidden: {http.StatusForbidden, "Forbidden"},
	}
	if errors.Is(err, errBusyStreams) {
		return http.StatusServiceUnavailable, errorBody{Error: err.Error(), Reason: "Busy"}
	}
	if c, ok := codes[contract.KindOf(err)]; ok {
		return c.status, errorBody{Error: err.Error(), Reason: c.reason}
	}
	return http.StatusInternalServerError, errorBody{Reason: "Internal",
		Error: "the agent failed to carry out the request; its log has the details"}
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// decode reads one JSON object of the request into v, refusing unknown
// fields, trailing data and oversized bodies.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &contract.Error{Kind: contract.Invalid, Message: fmt.Sprintf("request body is over %d bytes", maxBody)}
		}
		return &contract.Error{Kind: contract.Invalid, Message: "request body: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &contract.Error{Kind: contract.Invalid, Message: "request body: more than one JSON value"}
	}
	return nil
}

func created(made bool) int {
	if made {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if s.Volumes == nil {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	if _, _, err := s.Volumes.Capacity(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error(), Reason: "Unhealthy"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) createVolume(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	var req wire.CreateRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	v, made, err := s.Volumes.Create(r.Context(), tenant, req)
	return created(made), v, err
}

func (s *Server) listVolumes(_ http.ResponseWriter, _ *http.Request, tenant string) (int, any, error) {
	vs, err := s.Volumes.List(tenant)
	return http.StatusOK, map[string]any{"volumes": vs}, err
}

func (s *Server) getVolume(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	v, err := s.Volumes.Get(tenant, r.PathValue("name"))
	return http.StatusOK, v, err
}

func (s *Server) updateVolume(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	var req wire.UpdateRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	v, err := s.Volumes.Update(r.Context(), tenant, r.PathValue("name"), req)
	return http.StatusOK, v, err
}

func (s *Server) deleteVolume(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	cascade := r.URL.Query().Get("cascade") == "true"
	return http.StatusNoContent, nil, s.Volumes.Delete(r.Context(), tenant, r.PathValue("name"), cascade)
}

func (s *Server) listVolumeSnapshots(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	name := r.PathValue("name")
	if _, err := s.Volumes.Get(tenant, name); err != nil {
		return 0, nil, err
	}
	snaps, err := s.Volumes.ListSnapshots(tenant, name)
	return http.StatusOK, map[string]any{"snapshots": snaps}, err
}

type exportRequest struct {
	Client string `json:"client"`
}

func (s *Server) listExports(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	v, err := s.Volumes.Get(tenant, r.PathValue("name"))
	clients := v.Clients
	if clients == nil {
		clients = []string{}
	}
	return http.StatusOK, map[string]any{"clients": clients, "exportPath": v.ExportPath}, err
}

func (s *Server) addExport(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	var req exportRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := s.Networks.Allow(tenant, req.Client); err != nil {
		return 0, nil, err
	}
	v, err := s.Volumes.AddExport(r.Context(), tenant, r.PathValue("name"), req.Client)
	return http.StatusOK, v, err
}

func (s *Server) removeExport(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	v, err := s.Volumes.RemoveExport(r.Context(), tenant, r.PathValue("name"), r.PathValue("client"))
	return http.StatusOK, v, err
}

func (s *Server) createSnapshot(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	var req wire.SnapshotRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	snap, made, err := s.Volumes.CreateSnapshot(r.Context(), tenant, req)
	return created(made), snap, err
}

func (s *Server) listSnapshots(_ http.ResponseWriter, _ *http.Request, tenant string) (int, any, error) {
	snaps, err := s.Volumes.ListSnapshots(tenant, "")
	return http.StatusOK, map[string]any{"snapshots": snaps}, err
}

func (s *Server) getSnapshot(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	snap, err := s.Volumes.GetSnapshot(tenant, r.PathValue("name"))
	return http.StatusOK, snap, err
}

func (s *Server) deleteSnapshot(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	return http.StatusNoContent, nil, s.Volumes.DeleteSnapshot(r.Context(), tenant, r.PathValue("name"))
}

func (s *Server) clone(_ http.ResponseWriter, r *http.Request, tenant string) (int, any, error) {
	var req wire.CloneRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	v, made, err := s.Volumes.Clone(r.Context(), tenant, req)
	return created(made), v, err
}

// stats shows the tenant its own volumes, and of the filesystem only the
// size and free space it can use: devices, their paths and error
// counters are the host's, in the agent's metrics for its admin.
func (s *Server) stats(_ http.ResponseWriter, _ *http.Request, tenant string) (int, any, error) {
	size, free, err := s.Volumes.Capacity()
	if err != nil {
		return 0, nil, err
	}
	vs, err := s.Volumes.List(tenant)
	if err != nil {
		return 0, nil, err
	}
	var provisioned, used int64
	for _, v := range vs {
		provisioned += v.SizeBytes
		used += v.UsedBytes
	}
	return http.StatusOK, map[string]any{"filesystem": map[string]int64{"sizeBytes": size, "freeBytes": free}, "tenant": map[string]any{
		"volumes": len(vs), "provisionedBytes": provisioned, "usedBytes": used}}, nil
}

// metrics are the server's Prometheus metrics.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// replicationBytes counts replica stream bytes, sent and received.
	replicationBytes *prometheus.CounterVec
}

func newMetrics(volumes contract.Volumes) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_agent_http_requests_total",
			Help: "API requests by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_agent_http_request_duration_seconds",
			Help: "API request latency by route.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"route"}),
		replicationBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_agent_replication_stream_bytes_total",
			Help: "Bytes of replica streams that completed, by direction (sent, received)."}, []string{"direction"}),
	}
	fsGauge := func(name, help string, pick func(size, free int64) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			size, free, err := volumes.Capacity()
			if err != nil {
				return 0
			}
			return float64(pick(size, free))
		})
	}
	m.registry.MustRegister(m.requests, m.duration, m.replicationBytes)
	if volumes == nil {
		return m
	}
	m.registry.MustRegister(fsGauge("strata_agent_filesystem_size_bytes", "Size of the btrfs filesystem volumes live on.", func(size, _ int64) int64 { return size }),
		fsGauge("strata_agent_filesystem_free_bytes", "Free space of the btrfs filesystem volumes live on.", func(_, free int64) int64 { return free }))
	return m
}

func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := httpserver.NewStatusRecorder(w)
		h.ServeHTTP(rec, r)
		m.requests.WithLabelValues(route, fmt.Sprint(rec.Status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}
