package providers_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/notifications/providers"
)

// received is one request as the service saw it.
type received struct {
	method, path string
	header       http.Header
	body         []byte
}

// service is a local HTTP server that keeps what it is sent.
func service(t *testing.T) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{method: r.Method, path: r.URL.EscapedPath(), header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// failover is a storage event as strata's controller reports it, its
// metadata already cleaned as the dispatcher sends it.
func failover(severity string) eventv1.Event {
	return eventv1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Failover", Namespace: "apps", Name: "ledger", APIVersion: "failover.strata.dev/v1alpha1"},
		Severity:       severity, Timestamp: metav1.NewTime(time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)),
		Message: "promoted the backup on node b, data age 4s", Reason: "FailoverCompleted",
		Metadata:            map[string]string{"dataAge": "4s", "revision": "main@sha1:0123456789abcdef0123456789abcdef01234567", "summary": "homelab"},
		ReportingController: "strata",
	}
}

// deliver sends e to t at srv and returns what srv received.
func deliver(t *testing.T, tg providers.Target, e eventv1.Event, got chan received) received {
	t.Helper()
	req, err := providers.Request(context.Background(), tg, e)
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Send(http.DefaultClient, req); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the service received nothing")
	}
	return received{}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return m
}

func TestGenericPostsTheEventWithTheSecretsHeaders(t *testing.T) {
	srv, got := service(t)
	e := failover(eventv1.EventSeverityInfo)
	r := deliver(t, providers.Target{Type: "generic", Address: srv.URL + "/hook", Headers: map[string]string{"X-Team": "storage"}}, e, got)
	if r.method != http.MethodPost || r.path != "/hook" || r.header.Get("Content-Type") != "application/json" ||
		r.header.Get("gotk-component") != "strata" || r.header.Get("X-Team") != "storage" || r.header.Get("X-Signature") != "" {
		t.Fatalf("request %s %s %v", r.method, r.path, r.header)
	}
	var sent eventv1.Event
	if err := json.Unmarshal(r.body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.InvolvedObject.Kind != "Failover" || sent.Reason != "FailoverCompleted" || sent.Metadata["dataAge"] != "4s" || !sent.Timestamp.Equal(&e.Timestamp) {
		t.Fatalf("the body is not the event: %s", r.body)
	}
}

func TestGenericHMACSignsTheBodyWithTheToken(t *testing.T) {
	srv, got := service(t)
	r := deliver(t, providers.Target{Type: "generic-hmac", Address: srv.URL, Token: "s3cret"}, failover(eventv1.EventSeverityError), got)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(r.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); r.header.Get("X-Signature") != want {
		t.Fatalf("X-Signature %q, want %q", r.header.Get("X-Signature"), want)
	}
	if _, err := providers.Request(context.Background(), providers.Target{Type: "generic-hmac", Address: srv.URL}, failover("info")); err == nil {
		t.Fatal("a generic-hmac provider without a token was taken")
	}
}

func TestSlackGetsOneAttachmentColouredBySeverity(t *testing.T) {
	srv, got := service(t)
	r := deliver(t, providers.Target{Type: "slack", Address: srv.URL + "/services/T0/B0/x", Channel: "storage", Token: "xoxb-1"}, failover(eventv1.EventSeverityError), got)
	if r.path != "/services/T0/B0/x" || r.header.Get("Authorization") != "Bearer xoxb-1" {
		t.Fatalf("request %s %v", r.path, r.header)
	}
	m := decode(t, r.body)
	a := m["attachments"].([]any)[0].(map[string]any)
	fields := a["fields"].([]any)
	if m["channel"] != "storage" || m["username"] != "strata" || a["color"] != "danger" || a["author_name"] != "failover/ledger.apps" ||
		a["text"] != "promoted the backup on node b, data age 4s" || len(fields) != 3 || fields[0].(map[string]any)["title"] != "dataAge" {
		t.Fatalf("body %s", r.body)
	}
}

func TestDiscordGetsSlacksFormatAtItsSlackPath(t *testing.T) {
	srv, got := service(t)
	r := deliver(t, providers.Target{Type: "discord", Address: srv.URL + "/api/webhooks/1/abc", Username: "storage-bot"}, failover(eventv1.EventSeverityInfo), got)
	m := decode(t, r.body)
	a := m["attachments"].([]any)[0].(map[string]any)
	if r.path != "/api/webhooks/1/abc/slack" || m["username"] != "storage-bot" || a["color"] != "good" {
		t.Fatalf("request %s %s", r.path, r.body)
	}
}

func TestTeamsGetsAnAdaptiveCard(t *testing.T) {
	srv, got := service(t)
	r := deliver(t, providers.Target{Type: "msteams", Address: srv.URL + "/workflows/1"}, failover(eventv1.EventSeverityError), got)
	m := decode(t, r.body)
	att := m["attachments"].([]any)[0].(map[string]any)
	card := att["content"].(map[string]any)
	items := card["body"].([]any)[0].(map[string]any)["items"].([]any)
	facts := items[2].(map[string]any)["facts"].([]any)
	if m["type"] != "message" || att["contentType"] != "application/vnd.microsoft.card.adaptive" || card["version"] != "1.4" ||
		items[0].(map[string]any)["text"] != "failover/ledger.apps" || items[1].(map[string]any)["color"] != "attention" ||
		facts[0].(map[string]any)["title"] != "summary" {
		t.Fatalf("body %s", r.body)
	}
}

func TestMatrixPutsAMessageIntoTheRoom(t *testing.T) {
	srv, got := service(t)
	e := failover(eventv1.EventSeverityInfo)
	r := deliver(t, providers.Target{Type: "matrix", Address: srv.URL, Channel: "!room:example.org", Token: "syt_1"}, e, got)
	raw, _ := json.Marshal(e)
	if r.method != http.MethodPut || r.header.Get("Authorization") != "Bearer syt_1" ||
		!strings.HasPrefix(r.path, "/_matrix/client/r0/rooms/%21room:example.org/send/m.room.message/") {
		t.Fatalf("request %s %s %v", r.method, r.path, r.header)
	}
	if txn := r.path[strings.LastIndex(r.path, "/")+1:]; len(txn) != 40 {
		t.Fatalf("transaction ID %q is not the event's SHA-1 (%d bytes of event)", txn, len(raw))
	}
	m := decode(t, r.body)
	if m["msgtype"] != "m.text" || !strings.Contains(m["body"].(string), "failover/ledger.apps\npromoted the backup") ||
		!strings.Contains(m["body"].(string), "- dataAge: 4s") {
		t.Fatalf("body %s", r.body)
	}
}

func TestGitHubSetsTheRevisionsCommitStatus(t *testing.T) {
	srv, got := service(t)
	e := failover(eventv1.EventSeverityError)
	e.InvolvedObject.Kind, e.Reason = "Kustomization", "HealthCheckFailed"
	// An address that is not github.com is GitHub Enterprise: its API is under /api/v3.
	r := deliver(t, providers.Target{Type: "github", Address: srv.URL + "/org/cluster.git", Token: "ghp_1", ProviderUID: "8c1f2d3e-aaaa-bbbb"}, e, got)
	if r.method != http.MethodPost || r.path != "/api/v3/repos/org/cluster/statuses/0123456789abcdef0123456789abcdef01234567" ||
		r.header.Get("Authorization") != "Bearer ghp_1" {
		t.Fatalf("request %s %s %v", r.method, r.path, r.header)
	}
	m := decode(t, r.body)
	if m["state"] != "failure" || m["description"] != "health check failed" || m["context"] != "kustomization/ledger/8c1f2d3e" {
		t.Fatalf("body %s", r.body)
	}
	e.Reason = "Progressing"
	if _, err := providers.Request(context.Background(), providers.Target{Type: "github", Address: srv.URL + "/org/cluster", Token: "t"}, e); err != providers.ErrNothingToSend {
		t.Fatalf("a progressing event gave %v, want nothing to send", err)
	}
}

func TestGiteaSetsTheRevisionsCommitStatus(t *testing.T) {
	srv, got := service(t)
	e := failover(eventv1.EventSeverityInfo)
	e.InvolvedObject.Kind, e.Reason = "Kustomization", "ReconciliationSucceeded"
	r := deliver(t, providers.Target{Type: "gitea", Address: srv.URL + "/org/cluster", Token: "gt_1", ProviderUID: "77aa-1"}, e, got)
	m := decode(t, r.body)
	if r.path != "/api/v1/repos/org/cluster/statuses/0123456789abcdef0123456789abcdef01234567" || r.header.Get("Authorization") != "token gt_1" ||
		m["state"] != "success" || m["description"] != "reconciliation succeeded" || m["context"] != "kustomization/ledger/77aa" {
		t.Fatalf("request %s %v %s", r.path, r.header, r.body)
	}
	e.Reason = "Progressing"
	r = deliver(t, providers.Target{Type: "gitea", Address: srv.URL + "/org/cluster", Token: "gt_1"}, e, got)
	if decode(t, r.body)["state"] != "pending" {
		t.Fatalf("a progressing event gave %s", r.body)
	}
	delete(e.Metadata, "revision")
	if _, err := providers.Request(context.Background(), providers.Target{Type: "gitea", Address: srv.URL + "/org/cluster", Token: "t"}, e); err == nil {
		t.Fatal("an event without a revision was taken for a commit status")
	}
}

func TestAServiceThatRefusesIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "invalid_token", http.StatusForbidden)
	}))
	defer srv.Close()
	req, err := providers.Request(context.Background(), providers.Target{Type: "slack", Address: srv.URL}, failover("info"))
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Send(http.DefaultClient, req); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("error %v", err)
	}
}

// A revision is the event's, which anything reaching the events endpoint
// can post: one that is no commit hash never becomes part of the path a
// commit-status provider calls with its token.
func TestACommitStatusTakesOnlyACommitHash(t *testing.T) {
	e := failover(eventv1.EventSeverityInfo)
	for _, rev := range []string{"main@sha1:../../../user/keys", "main@sha1:abc/def", "sha1:ZZZZZZZ"} {
		e.Metadata["revision"] = rev
		for _, typ := range []string{"github", "gitea"} {
			if req, err := providers.Request(context.Background(), providers.Target{Type: typ, Address: "https://github.com/org/cluster", Token: "t"}, e); err == nil {
				t.Errorf("%s with revision %q: requested %s", typ, rev, req.URL)
			}
		}
	}
}
