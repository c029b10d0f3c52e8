// Package alerts serves Flux's Alert and Provider kinds
// (notification.toolkit.fluxcd.io/v1beta3) for clusters without Flux's
// notification-controller: it takes events in Flux's format, at an HTTP
// endpoint as that controller does, finds the Alerts that match each, and
// sends it to their Providers (package providers). strata's own kinds
// (Failover, ReplicationSource, LVMCluster, ...) may be event sources.
package alerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"net/http"
	"strings"
	"sync"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Dispatcher takes events and sends them where the Alerts say.
type Dispatcher struct {
	// Client reads Alerts and Providers (a cache will do).
	Client client.Reader
	// Direct reads Secrets and the labels of event sources, uncached.
	Direct client.Reader
	// Events records on an Alert why a notification could not be sent.
	Events events.EventRecorder
	// Hosts are the hosts Providers may send to: a name, or "*.domain"
	// for any name under it (--alert-hosts).
	Hosts []string
	// RateInterval drops an event equal to one seen less than this ago
	// (Flux's --rate-limit-interval); zero takes five minutes.
	RateInterval time.Duration
	// NoCrossNamespaceRefs refuses event sources in other namespaces than
	// the Alert's.
	NoCrossNamespaceRefs bool
	// Selector, when set, takes only the Alerts it matches (sharding
	// beside Flux, --watch-label-selector); the others are Flux's.
	Selector labels.Selector
	// Transport sends the requests; nil takes http.DefaultTransport's
	// settings. Tests set it to trust their servers.
	Transport http.RoundTripper
	Log       logr.Logger

	mu   sync.Mutex
	seen map[string]time.Time
	// sends tracks notifications in flight, for Wait.
	sends sync.WaitGroup
	// once makes the shared transport when none was given.
	once sync.Once
}

// bodyLimit bounds an event's request body: Flux caps a message at
// 39,000 characters, metadata adds little.
const bodyLimit = 256 << 10

// ServeHTTP takes one event, POSTed as Flux's controllers post it.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an event", http.StatusMethodNotAllowed)
		return
	}
	var e eventv1.Event
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, bodyLimit)).Decode(&e); err != nil {
		http.Error(w, "the body is not an event in Flux's format: "+err.Error(), http.StatusBadRequest)
		return
	}
	if e.InvolvedObject.Kind == "" || e.InvolvedObject.Name == "" {
		http.Error(w, "the event names no involved object", http.StatusBadRequest)
		return
	}
	if !d.firstInInterval(e) {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	d.Dispatch(r.Context(), e)
	w.WriteHeader(http.StatusAccepted)
}

// firstInInterval reports whether no equal event came within the rate
// interval, and remembers this one.
func (d *Dispatcher) firstInInterval(e eventv1.Event) bool {
	interval := d.RateInterval
	if interval == 0 {
		interval = 5 * time.Minute
	}
	key, now := eventKey(e), time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]time.Time{}
	}
	for k, at := range d.seen { // forget what can no longer match
		if now.Sub(at) >= interval {
			delete(d.seen, k)
		}
	}
	if _, dup := d.seen[key]; dup {
		return false
	}
	d.seen[key] = now
	return true
}

// eventKey identifies an event for the rate limit, as Flux's does: its
// object, its message, and the revision it is about.
func eventKey(e eventv1.Event) string {
	group := e.InvolvedObject.GroupVersionKind().Group
	parts := []string{"name=" + e.InvolvedObject.Name, "namespace=" + e.InvolvedObject.Namespace,
		"kind=" + e.InvolvedObject.Kind, "message=" + e.Message}
	for _, k := range []string{eventv1.MetaOriginRevisionKey, eventv1.MetaRevisionKey, eventv1.MetaTokenKey} {
		if v, ok := e.Metadata[group+"/"+k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "/")))
	return hex.EncodeToString(sum[:])
}

// Dispatch sends e to the Provider of every Alert it matches, each in
// the background.
func (d *Dispatcher) Dispatch(ctx context.Context, e eventv1.Event) {
	e.Metadata = ownMetadata(e)
	matched, err := d.matchingAlerts(ctx, e)
	if err != nil {
		d.Log.Error(err, "event not dispatched", "kind", e.InvolvedObject.Kind, "name", e.InvolvedObject.Name)
		return
	}
	for i := range matched {
		d.notify(ctx, &matched[i], e)
	}
}

// Wait waits until the notifications sent so far are done.
func (d *Dispatcher) Wait() { d.sends.Wait() }

// ownMetadata keeps the metadata under the object's own API group, the
// group taken off ("source.toolkit.fluxcd.io/revision" becomes
// "revision"), less checksums and digests, as Flux's notification-
// controller does before it sends.
func ownMetadata(e eventv1.Event) map[string]string {
	prefix := e.InvolvedObject.GroupVersionKind().Group + "/"
	out := map[string]string{}
	for k, v := range e.Metadata {
		key, ok := strings.CutPrefix(k, prefix)
		if !ok || key == eventv1.MetaChecksumKey || key == eventv1.MetaDigestKey {
			continue
		}
		out[key] = v
	}
	return out
}
