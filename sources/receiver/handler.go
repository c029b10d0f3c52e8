package receiver

import (
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // GitHub still signs with SHA-1 for old webhooks.
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxBody is the largest payload read, GitHub's own limit. A larger one
// is refused whole (413), never cut short: a signature is over the whole
// payload, and a truncated one could only fail to match.
const MaxBody = 25 << 20

// Handler answers webhook calls. Reader finds Receivers (by the index
// SetupWithManager creates); Writer annotates the sources to reconcile.
type Handler struct {
	Reader client.Reader
	Writer client.Client
	// seen remembers recent delivery IDs, to refuse replays.
	seen deliveries
}

// ServeHTTP validates the call against every Receiver at the path and
// requests a reconcile of their resources.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := ctrl.LoggerFrom(ctx).WithValues("path", r.URL.Path)
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
		return
	}
	if len(body) > MaxBody {
		http.Error(w, fmt.Sprintf("payload is over %d bytes", MaxBody), http.StatusRequestEntityTooLarge)
		return
	}
	list := &notificationv1.ReceiverList{}
	if err := h.Reader.List(ctx, list, client.MatchingFields{webhookPathIndex: r.URL.Path}); err != nil {
		http.Error(w, "listing receivers", http.StatusInternalServerError)
		return
	}
	if len(list.Items) == 0 {
		http.NotFound(w, r)
		return
	}
	for i := range list.Items {
		rcv := &list.Items[i]
		if rcv.Spec.Suspend {
			continue
		}
		token, err := Token(ctx, h.Reader, rcv)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		act, err := validate(rcv, token, r, body)
		if err != nil {
			log.Info("webhook rejected", "receiver", client.ObjectKeyFromObject(rcv), "error", err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !act {
			continue
		}
		if id := deliveryID(rcv, r.Header); id != "" && !h.seen.first(client.ObjectKeyFromObject(rcv).String()+"/"+id, time.Now()) {
			log.Info("webhook replay ignored", "receiver", client.ObjectKeyFromObject(rcv), "delivery", id)
			continue
		}
		if err := h.requestReconcile(ctx, rcv); err != nil {
			log.Error(err, "requesting reconcile", "receiver", client.ObjectKeyFromObject(rcv))
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// validate checks the caller per receiver type. It returns false for calls
// that are genuine but ask for nothing (GitHub's ping, unlisted events).
func validate(rcv *notificationv1.Receiver, token string, r *http.Request, body []byte) (bool, error) {
	switch rcv.Spec.Type {
	case notificationv1.GenericReceiver:
		return true, nil
	case notificationv1.GitHubReceiver:
		if err := githubSignature(token, r.Header, body); err != nil {
			return false, err
		}
		event := r.Header.Get("X-GitHub-Event")
		return event != "ping" && wanted(rcv.Spec.Events, event), nil
	case notificationv1.GitLabReceiver:
		if !hmac.Equal([]byte(r.Header.Get("X-Gitlab-Token")), []byte(token)) {
			return false, fmt.Errorf("X-Gitlab-Token does not match the receiver's token")
		}
		return wanted(rcv.Spec.Events, r.Header.Get("X-Gitlab-Event")), nil
	}
	return false, fmt.Errorf("receiver type %q is not supported: use generic, github or gitlab", rcv.Spec.Type)
}

func githubSignature(token string, header http.Header, body []byte) error {
	sig, newHash := header.Get("X-Hub-Signature-256"), sha256.New
	if sig == "" {
		sig, newHash = header.Get("X-Hub-Signature"), sha1.New
	}
	algo, digest, ok := strings.Cut(sig, "=")
	if !ok {
		return fmt.Errorf("missing or malformed X-Hub-Signature-256 header")
	}
	mac := hmac.New(func() hash.Hash { return newHash() }, []byte(token))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	if (algo != "sha256" && algo != "sha1") || !hmac.Equal([]byte(digest), []byte(want)) {
		return fmt.Errorf("GitHub signature does not match the receiver's token")
	}
	return nil
}

func wanted(events []string, event string) bool {
	if len(events) == 0 {
		return true
	}
	return slices.ContainsFunc(events, func(e string) bool { return strings.EqualFold(e, event) })
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt on each resource,
// exactly as `flux reconcile` does, which the controllers act on at once.
func (h *Handler) requestReconcile(ctx context.Context, rcv *notificationv1.Receiver) error {
	now := time.Now().Format(time.RFC3339Nano)
	for _, res := range rcv.Spec.Resources {
		targets, err := h.targets(ctx, rcv, res)
		if err != nil {
			return err
		}
		for _, t := range targets {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, now)
			err := h.Writer.Patch(ctx, t, client.RawPatch(types.MergePatchType, []byte(patch)))
			if apierrors.IsNotFound(err) {
				// A resource listed but not (yet) there has nothing to reconcile.
				ctrl.LoggerFrom(ctx).Info("receiver resource not found", "kind", t.GetKind(), "namespace", t.GetNamespace(), "name", t.GetName())
				continue
			}
			if err != nil {
				return fmt.Errorf("annotating %s %s/%s: %w", t.GetKind(), t.GetNamespace(), t.GetName(), err)
			}
		}
	}
	return nil
}

func (h *Handler) targets(ctx context.Context, rcv *notificationv1.Receiver, res notificationv1.ReceiverResource) ([]*unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil || res.APIVersion == "" {
		gv = schema.GroupVersion{Group: "source.toolkit.fluxcd.io", Version: "v1"}
	}
	ns := res.Namespace
	if ns == "" {
		ns = rcv.Namespace
	}
	gvk := gv.WithKind(res.Kind)
	if res.Name != "*" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(res.Name)
		return []*unstructured.Unstructured{u}, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gv.WithKind(res.Kind + "List"))
	if err := h.Writer.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(res.MatchLabels)); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// deliveryID is the ID the forge gives each delivery, which a replay of
// a captured call repeats; empty for receivers whose forge sends none.
func deliveryID(rcv *notificationv1.Receiver, header http.Header) string {
	switch rcv.Spec.Type {
	case notificationv1.GitHubReceiver:
		return header.Get("X-GitHub-Delivery")
	case notificationv1.GitLabReceiver:
		return header.Get("X-Gitlab-Event-UUID")
	}
	return ""
}

// replayWindow is how long a delivery ID is remembered; maxDeliveries
// bounds the memory it takes.
const (
	replayWindow  = time.Hour
	maxDeliveries = 10000
)

// deliveries is the set of delivery IDs seen within the window.
type deliveries struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// first records id and reports whether it was not seen within the window.
func (d *deliveries) first(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]time.Time{}
	}
	if at, ok := d.seen[id]; ok && now.Sub(at) < replayWindow {
		return false
	}
	if len(d.seen) >= maxDeliveries {
		for k, at := range d.seen {
			if now.Sub(at) >= replayWindow {
				delete(d.seen, k)
			}
		}
		for k := range d.seen { // still full: forget an arbitrary one
			if len(d.seen) < maxDeliveries {
				break
			}
			delete(d.seen, k)
		}
	}
	d.seen[id] = now
	return true
}
