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
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const maxBody = 1 << 20

// Handler answers webhook calls. Reader finds Receivers (by the index
// SetupWithManager creates); Writer annotates the sources to reconcile.
type Handler struct {
	Reader client.Reader
	Writer client.Client
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
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
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
			if err := h.Writer.Patch(ctx, t, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("annotating %s %s/%s: %w", t.GetKind(), t.GetNamespace(), t.GetName(), client.IgnoreNotFound(err))
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
