package fluxevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/fluxevents"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// collector is an HTTP endpoint that keeps the events posted to it.
type collector struct {
	mu     sync.Mutex
	events []eventv1.Event
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var e eventv1.Event
	if err := json.Unmarshal(body, &e); err == nil {
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
	}
}

func (c *collector) received() []eventv1.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]eventv1.Event(nil), c.events...)
}

// collecting is a recorder posting to a collector of its own.
func collecting(t *testing.T) (*collector, fluxevents.Recorder) {
	t.Helper()
	got := &collector{}
	srv := httptest.NewServer(got)
	t.Cleanup(srv.Close)
	rec, err := fluxevents.New(events.NewFakeRecorder(10), scheme.New(), testr.New(t), srv.URL, "strata")
	if err != nil {
		t.Fatal(err)
	}
	return got, rec
}

// The payload is Flux's, field by field, as kustomize-controller sends it
// for a Kustomization: the object's reference with its kind and API
// version, the severity, reason and message, the revision under
// kustomize.toolkit.fluxcd.io/revision, and the reporting controller.
func TestThePayloadIsFluxs(t *testing.T) {
	got, rec := collecting(t)
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: "flux-system", UID: "u-1", ResourceVersion: "7"}}
	ks.Status.LastAttemptedRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	rec.Eventf(ks, nil, corev1.EventTypeWarning, "DeletionBlocked", "Prune", "%d deletion(s) blocked", 1)
	var e eventv1.Event
	testenv.Eventually(t, 10*time.Second, func() error {
		es := got.received()
		if len(es) != 1 {
			return fmt.Errorf("%d events posted, want 1", len(es))
		}
		e = es[0]
		return nil
	})
	checks := map[string][2]string{
		"involvedObject.kind":       {e.InvolvedObject.Kind, "Kustomization"},
		"involvedObject.apiVersion": {e.InvolvedObject.APIVersion, "kustomize.toolkit.fluxcd.io/v1"},
		"involvedObject.namespace":  {e.InvolvedObject.Namespace, "flux-system"},
		"involvedObject.name":       {e.InvolvedObject.Name, "apps"},
		"involvedObject.uid":        {string(e.InvolvedObject.UID), "u-1"},
		"severity":                  {e.Severity, eventv1.EventSeverityError},
		"reason":                    {e.Reason, "DeletionBlocked"},
		"message":                   {e.Message, "1 deletion(s) blocked"},
		"metadata revision":         {e.Metadata["kustomize.toolkit.fluxcd.io/revision"], ks.Status.LastAttemptedRevision},
		"reportingController":       {e.ReportingController, "strata"},
	}
	for field, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", field, c[0], c[1])
		}
	}
	if e.ReportingInstance == "" || e.Timestamp.IsZero() {
		t.Errorf("reportingInstance %q, timestamp %v: want both set", e.ReportingInstance, e.Timestamp)
	}
}

// Flux's real notification-controller routes strata's events as its own:
// an Alert for every Kustomization sends one of strata's Kustomization
// events, with its revision, through a generic Provider to a webhook.
// (Flux's Alert CRD accepts only Flux's own kinds in eventSources, so an
// Alert for kind Failover is refused by the API server: see
// docs/notifications.md.)
func TestFluxsNotificationControllerRoutesStrataEvents(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	nc := testenv.FluxNotificationController(t, env)
	var hook collector
	srv := httptest.NewServer(&hook)
	t.Cleanup(srv.Close)
	ns := fmt.Sprintf("events-%d", os.Getpid())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	provider := &notificationv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns},
		Spec: notificationv1beta3.ProviderSpec{Type: notificationv1beta3.GenericProvider, Address: srv.URL}}
	alert := &notificationv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "failovers", Namespace: ns},
		Spec: notificationv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "webhook"},
			EventSources: []notificationv1.CrossNamespaceObjectReference{{Kind: "Kustomization", Name: "*"}}}}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./apps", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"}}}
	for _, o := range []clientObject{provider, alert, ks} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ks.Status.LastAttemptedRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	rec, err := fluxevents.New(events.NewFakeRecorder(100), scheme.New(), testr.New(t), nc, "strata")
	if err != nil {
		t.Fatal(err)
	}
	attempt := 0
	testenv.Eventually(t, time.Minute, func() error {
		// The controller reads Alerts from its cache: until it has this
		// one, an event goes nowhere. Each try has its own message, as
		// the controller drops repeats.
		attempt++
		rec.Eventf(ks, nil, corev1.EventTypeWarning, "DeletionBlocked", "Prune", "1 deletion(s) blocked (try %d)", attempt)
		for _, e := range hook.received() {
			if e.InvolvedObject.Kind == "Kustomization" && e.InvolvedObject.Name == "apps" && e.Reason == "DeletionBlocked" &&
				e.Metadata["revision"] == ks.Status.LastAttemptedRevision {
				return nil
			}
		}
		return fmt.Errorf("no event with its revision at the webhook after %d tries: %+v", attempt, hook.received())
	})
}

// An endpoint that is down never holds the caller: Flux's recorder
// retries for seconds, and a failover's promotion records events.
func TestADownEndpointDoesNotHoldTheCaller(t *testing.T) {
	kube := events.NewFakeRecorder(100)
	rec, err := fluxevents.New(kube, scheme.New(), testr.New(t), "http://127.0.0.1:1/", "strata-failover")
	if err != nil {
		t.Fatal(err)
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: "flux-system"}}
	start := time.Now()
	for i := 0; i < 20; i++ {
		rec.Eventf(ks, nil, corev1.EventTypeNormal, "Progressing", "Apply", "try %d", i)
	}
	// Posting even one synchronously would take Flux's recorder over a
	// second of retries against the closed port.
	if d := time.Since(start); d > time.Second {
		t.Fatalf("20 events took %v to record with the endpoint down", d)
	}
	if len(kube.Events) != 20 {
		t.Fatalf("%d Kubernetes events recorded, want 20", len(kube.Events))
	}
}

// Metadata an event carries reaches Flux's payload under the object's
// API group, as Flux's controllers write theirs; a plain Kubernetes
// recorder records the event alone.
func TestMetadataGoesUnderTheObjectsGroup(t *testing.T) {
	got, rec := collecting(t)
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Name: "ledger", Namespace: "apps"}}
	fluxevents.Eventf(rec, map[string]string{"dataAge": "4s"}, fo, corev1.EventTypeNormal, "FailoverCompleted", "Start", "done")
	testenv.Eventually(t, 10*time.Second, func() error {
		es := got.received()
		if len(es) != 1 || es[0].Metadata["failover.strata.dev/dataAge"] != "4s" {
			return fmt.Errorf("posted %+v", es)
		}
		return nil
	})
	plain := events.NewFakeRecorder(1)
	fluxevents.Eventf(plain, map[string]string{"dataAge": "4s"}, fo, corev1.EventTypeNormal, "FailoverCompleted", "Start", "done")
	if e := <-plain.Events; e != "Normal FailoverCompleted done" {
		t.Fatalf("plain recorder got %q", e)
	}
}
