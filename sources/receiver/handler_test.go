package receiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/strata-gitops/strata/internal/scheme"
)

const (
	token = "a-receiver-token-0123456789"
	path  = "/hook/abc"
)

// world is a Receiver of the given type at path whose resources are
// GitRepositories named in names, of which only those in present exist.
func world(t *testing.T, typ string, names []string, present ...string) (*Handler, client.Client) {
	t.Helper()
	rcv := &notificationv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: "flux-system"},
		Spec:   notificationv1.ReceiverSpec{Type: typ, SecretRef: &meta.LocalObjectReference{Name: "token"}},
		Status: notificationv1.ReceiverStatus{WebhookPath: path}}
	for _, n := range names {
		rcv.Spec.Resources = append(rcv.Spec.Resources, notificationv1.ReceiverResource{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: n}})
	}
	objs := []client.Object{rcv, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "flux-system"},
		Data: map[string][]byte{"token": []byte(token)}}}
	for _, n := range present {
		objs = append(objs, &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "flux-system"}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&notificationv1.Receiver{}, webhookPathIndex, func(o client.Object) []string {
			return []string{o.(*notificationv1.Receiver).Status.WebhookPath}
		}).Build()
	return &Handler{Reader: c, Writer: c}, c
}

func githubCall(body []byte, delivery string) *http.Request {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write(body)
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	r.Header.Set("X-GitHub-Event", "push")
	r.Header.Set("X-GitHub-Delivery", delivery)
	return r
}

func serve(h *Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func requested(t *testing.T, c client.Client, name string) string {
	t.Helper()
	repo := &sourcev1.GitRepository{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "flux-system", Name: name}, repo); err != nil {
		t.Fatal(err)
	}
	return repo.Annotations[meta.ReconcileRequestAnnotation]
}

// A resource that does not exist is skipped; the others are reconciled
// and the call succeeds.
func TestAMissingResourceIsIgnored(t *testing.T) {
	h, c := world(t, notificationv1.GitHubReceiver, []string{"gone", "there"}, "there")
	w := serve(h, githubCall([]byte(`{"ref":"refs/heads/main"}`), "d-1"))
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "%!") {
		t.Fatalf("answer %d %q, want 200", w.Code, w.Body.String())
	}
	if requested(t, c, "there") == "" {
		t.Fatal("the existing GitRepository was not asked to reconcile")
	}
}

// A signed payload over 1 MiB is checked whole and accepted; one over
// the limit is refused as too large, not as a bad signature.
func TestLargeSignedPayloads(t *testing.T) {
	h, c := world(t, notificationv1.GitHubReceiver, []string{"repo"}, "repo")
	big := []byte(`{"commits":"` + strings.Repeat("x", 3<<20) + `"}`)
	if w := serve(h, githubCall(big, "d-big")); w.Code != http.StatusOK {
		t.Fatalf("a 3 MiB signed payload: %d %s", w.Code, w.Body.String())
	}
	if requested(t, c, "repo") == "" {
		t.Fatal("the large payload did not request a reconcile")
	}
	huge := make([]byte, MaxBody+1)
	if w := serve(h, githubCall(huge, "d-huge")); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a payload over the limit: %d %s, want 413", w.Code, w.Body.String())
	}
}

// A captured call sent again carries the same delivery ID and requests
// nothing; a new delivery does.
func TestReplaysAreIgnored(t *testing.T) {
	h, c := world(t, notificationv1.GitHubReceiver, []string{"repo"}, "repo")
	body := []byte(`{"ref":"refs/heads/main"}`)
	if w := serve(h, githubCall(body, "delivery-1")); w.Code != http.StatusOK {
		t.Fatalf("first delivery: %d", w.Code)
	}
	first := requested(t, c, "repo")
	clear := func() {
		repo := &sourcev1.GitRepository{}
		_ = c.Get(context.Background(), client.ObjectKey{Namespace: "flux-system", Name: "repo"}, repo)
		repo.Annotations = nil
		if err := c.Update(context.Background(), repo); err != nil {
			t.Fatal(err)
		}
	}
	clear()
	if w := serve(h, githubCall(body, "delivery-1")); w.Code != http.StatusOK || requested(t, c, "repo") != "" {
		t.Fatalf("the replay: %d, annotation %q; want 200 and no reconcile requested", w.Code, requested(t, c, "repo"))
	}
	if w := serve(h, githubCall(body, "delivery-2")); w.Code != http.StatusOK || requested(t, c, "repo") == "" {
		t.Fatalf("a new delivery after %q: %d, no reconcile requested", first, w.Code)
	}
}

func TestBadSignaturesAreRefused(t *testing.T) {
	h, c := world(t, notificationv1.GitHubReceiver, []string{"repo"}, "repo")
	r := githubCall([]byte(`{}`), "d-x")
	r.Header.Set("X-Hub-Signature-256", "sha256=00")
	if w := serve(h, r); w.Code != http.StatusUnauthorized || requested(t, c, "repo") != "" {
		t.Fatalf("a bad signature: %d", w.Code)
	}
}

func TestDeliveriesForgetAfterTheWindow(t *testing.T) {
	var d deliveries
	now := time.Now()
	if !d.first("a", now) || d.first("a", now.Add(time.Minute)) || !d.first("a", now.Add(replayWindow+time.Second)) {
		t.Fatal("a delivery ID is refused within the window and accepted after it")
	}
	for i := range maxDeliveries + 10 {
		d.first(string(rune(i)), now)
	}
	if len(d.seen) > maxDeliveries {
		t.Fatalf("%d IDs remembered, the bound is %d", len(d.seen), maxDeliveries)
	}
}
