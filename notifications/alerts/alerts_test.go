package alerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/fluxevents"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/notifications/alerts"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// hook is a webhook receiver that keeps what it is sent.
type hook struct {
	mu    sync.Mutex
	got   []eventv1.Event
	heads []http.Header
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var e eventv1.Event
	if json.Unmarshal(body, &e) == nil {
		h.mu.Lock()
		h.got, h.heads = append(h.got, e), append(h.heads, r.Header.Clone())
		h.mu.Unlock()
	}
}

func (h *hook) events() []eventv1.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]eventv1.Event(nil), h.got...)
}

// setup is a namespace with a webhook receiver, a dispatcher serving
// Flux's event endpoint, and a recorder posting to it as strata's
// controller does.
type setup struct {
	ns       string
	c        client.Client
	hook     *hook
	hookURL  string
	d        *alerts.Dispatcher
	alertEvs *events.FakeRecorder
	rec      fluxevents.Recorder
}

func newSetup(t *testing.T, name string, allowHook bool) *setup {
	env := testenv.Get(t)
	s := &setup{ns: testenv.Namespace(t, env.Client, fmt.Sprintf("%s-%d", name, os.Getpid())), c: env.Client, hook: &hook{}}
	srv := httptest.NewServer(s.hook)
	t.Cleanup(srv.Close)
	s.hookURL = srv.URL
	s.alertEvs = events.NewFakeRecorder(100)
	s.d = &alerts.Dispatcher{Client: env.Client, Direct: env.Client, Events: s.alertEvs, Log: testr.New(t)}
	if allowHook {
		s.d.Hosts = []string{"127.0.0.1"}
	}
	endpoint := httptest.NewServer(s.d)
	t.Cleanup(endpoint.Close)
	rec, err := fluxevents.New(events.NewFakeRecorder(100), scheme.New(), testr.New(t), endpoint.URL, "strata")
	if err != nil {
		t.Fatal(err)
	}
	s.rec = rec
	return s
}

func (s *setup) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		o.SetNamespace(s.ns)
		if err := s.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func provider(name, typ, address, secret string) *notificationv1beta3.Provider {
	p := &notificationv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: notificationv1beta3.ProviderSpec{Type: typ, Address: address}}
	if secret != "" {
		p.Spec.SecretRef = &meta.LocalObjectReference{Name: secret}
	}
	return p
}

func alert(name, provider string, sources ...notificationv1.CrossNamespaceObjectReference) *notificationv1beta3.Alert {
	return &notificationv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: notificationv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: provider}, EventSources: sources}}
}

func source(kind, name string) notificationv1.CrossNamespaceObjectReference {
	return notificationv1.CrossNamespaceObjectReference{Kind: kind, Name: name}
}

func (s *setup) failover(name string) *failoverv1alpha1.Failover {
	return &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, UID: "f-1"}}
}

// waitFor waits until the hook holds n events, and checks that no more
// come once the dispatcher finished what it started. Each test's last
// event is one that must be sent: the recorder posts in order, so once it
// is in, every event before it was dispatched.
func (s *setup) waitFor(t *testing.T, n int) []eventv1.Event {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		if got := len(s.hook.events()); got < n {
			return fmt.Errorf("%d notifications, want %d", got, n)
		}
		return nil
	})
	s.d.Wait()
	got := s.hook.events()
	if len(got) != n {
		t.Fatalf("%d notifications, want %d: %+v", len(got), n, got)
	}
	return got
}

// An Alert whose event sources name strata's Failover kind gets a
// Failover's event, through a generic-hmac Provider whose Secret holds
// its key and a header; the summary and the Alert's metadata ride along,
// and an Alert for another kind gets nothing.
func TestAnAlertForFailoversGetsStrataEvents(t *testing.T) {
	s := newSetup(t, "alert-failover", true)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-key"},
		Data: map[string][]byte{"token": []byte("k3y"), "headers": []byte("X-Cluster: homelab\n")}}
	a := alert("failovers", "hook", source("Failover", "*"))
	a.Spec.Summary, a.Spec.EventMetadata = "homelab", map[string]string{"env": "home"}
	s.create(t, secret, provider("hook", "generic-hmac", s.hookURL, "hook-key"), a,
		alert("kustomizations", "hook", source("Kustomization", "*")))

	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeWarning, "FailoverStarted", "Failover", "node a lost, failing over to b")
	got := s.waitFor(t, 1)
	e := got[0]
	if e.InvolvedObject.Kind != "Failover" || e.Reason != "FailoverStarted" || e.Severity != eventv1.EventSeverityError ||
		e.Metadata["summary"] != "homelab" || e.Metadata["env"] != "home" {
		t.Fatalf("notification %+v", e)
	}
	if h := s.hook.heads[0]; h.Get("X-Cluster") != "homelab" || !strings.HasPrefix(h.Get("X-Signature"), "sha256=") {
		t.Fatalf("headers %v", h)
	}
}

// eventSeverity error takes only errors; an inclusion list lets only
// matching messages through, an exclusion list stops matching ones;
// suspended Alerts and Providers send nothing; a name selects one object.
func TestAlertsFilterAsFluxsDo(t *testing.T) {
	s := newSetup(t, "alert-filter", true)
	errorsOnly := alert("errors", "hook", source("Failover", "*"))
	errorsOnly.Spec.EventSeverity = eventv1.EventSeverityError
	included := alert("included", "hook", source("Failover", "ledger"))
	included.Spec.InclusionList = []string{"^data age"}
	included.Spec.ExclusionList = []string{"ignore me"}
	suspended := alert("suspended", "hook", source("Failover", "*"))
	suspended.Spec.Suspend = true
	quiet := provider("quiet", "generic", s.hookURL, "")
	quiet.Spec.Suspend = true
	s.create(t, provider("hook", "generic", s.hookURL, ""), quiet, errorsOnly, included, suspended,
		alert("to-quiet", "quiet", source("Failover", "*")))

	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeNormal, "FailoverCompleted", "Failover", "data age 3s, took 12s")            // included
	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeNormal, "Protected", "Failover", "pair in sync")                             // nobody
	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeNormal, "Protected", "Failover", "data age 1s, ignore me")                   // excluded
	s.rec.Eventf(s.failover("other"), nil, corev1.EventTypeNormal, "FailoverCompleted", "Failover", "data age 9s")                       // wrong name
	s.rec.Eventf(s.failover("other"), nil, corev1.EventTypeWarning, "DataAgeExceeded", "Failover", "data age 20m passes maxDataAge 15m") // errors
	got := s.waitFor(t, 2)
	reasons := map[string]bool{}
	for _, e := range got {
		reasons[e.InvolvedObject.Name+"/"+e.Reason] = true
	}
	if !reasons["ledger/FailoverCompleted"] || !reasons["other/DataAgeExceeded"] {
		t.Fatalf("notified %v", reasons)
	}
}

// The same event again within the rate interval is dropped, as Flux's
// notification-controller drops it; another message is not.
func TestRepeatsAreDroppedWithinTheInterval(t *testing.T) {
	s := newSetup(t, "alert-repeat", true)
	s.create(t, provider("hook", "generic", s.hookURL, ""), alert("all", "hook", source("Failover", "*")))
	for range 3 {
		s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeWarning, "NodeLeaseStale", "Failover", "node a's Lease is 20s old")
	}
	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeWarning, "NodeLeaseStale", "Failover", "node a's Lease is 40s old")
	got := s.waitFor(t, 2)
	if got[0].Message == got[1].Message {
		t.Fatalf("a repeat went out: %+v", got)
	}
}

// A Provider whose host is not on the allow-list is never requested; the
// Alert's event says which host and which setting to change.
func TestAHostOffTheListIsNeverRequested(t *testing.T) {
	s := newSetup(t, "alert-hosts", false)
	s.create(t, provider("hook", "generic", s.hookURL, ""), alert("all", "hook", source("Failover", "*")))
	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeWarning, "FailoverStarted", "Failover", "node a lost")
	var warning string
	testenv.Eventually(t, 20*time.Second, func() error {
		select {
		case warning = <-s.alertEvs.Events:
			return nil
		default:
			return fmt.Errorf("no event on the Alert")
		}
	})
	s.d.Wait()
	if !strings.Contains(warning, "NotificationFailed") || !strings.Contains(warning, `"127.0.0.1"`) || !strings.Contains(warning, "--alert-hosts") {
		t.Fatalf("event %q", warning)
	}
	if n := len(s.hook.events()); n != 0 {
		t.Fatalf("the host off the list got %d requests", n)
	}
}

// matchLabels with name '*' takes only objects carrying the labels.
func TestMatchLabelsSelectsObjects(t *testing.T) {
	s := newSetup(t, "alert-labels", true)
	src := source("Kustomization", "*")
	src.MatchLabels = map[string]string{"tier": "storage"}
	s.create(t, provider("hook", "generic", s.hookURL, ""), alert("storage", "hook", src))
	// The matching one last: once it is sent, the other was dispatched.
	for _, o := range []struct {
		name   string
		labels map[string]string
	}{{"web", map[string]string{"tier": "front"}}, {"db", map[string]string{"tier": "storage"}}} {
		name, labels := o.name, o.labels
		ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./", Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "repo"}}}
		s.create(t, ks)
		s.rec.Eventf(ks, nil, corev1.EventTypeNormal, "ReconciliationSucceeded", "Reconcile", "applied "+name)
	}
	got := s.waitFor(t, 1)
	if got[0].InvolvedObject.Name != "db" {
		t.Fatalf("notified %s", got[0].InvolvedObject.Name)
	}
}

// Sharded beside Flux, strata takes only the Alerts its selector
// matches; the others are Flux's notification-controller's.
func TestAShardTakesOnlyItsAlerts(t *testing.T) {
	s := newSetup(t, "alert-shard", true)
	s.d.Selector = labels.SelectorFromSet(labels.Set{"sharding.fluxcd.io/key": "strata"})
	mine := alert("mine", "hook", source("Failover", "ledger"))
	mine.Labels = map[string]string{"sharding.fluxcd.io/key": "strata"}
	s.create(t, provider("hook", "generic", s.hookURL, ""), alert("fluxs", "hook", source("Failover", "*")), mine)
	s.rec.Eventf(s.failover("other"), nil, corev1.EventTypeWarning, "FailoverStarted", "Failover", "Flux's Alert only")
	s.rec.Eventf(s.failover("ledger"), nil, corev1.EventTypeWarning, "FailoverStarted", "Failover", "both Alerts")
	got := s.waitFor(t, 1)
	if got[0].Message != "both Alerts" {
		t.Fatalf("notified %q", got[0].Message)
	}
}

// A node's event (a btrfs host full, as its agent records it on the
// Node) reaches an Alert naming kind Node, though the Node is in no
// namespace.
func TestANodesEventReachesAnAlertForNodes(t *testing.T) {
	s := newSetup(t, "alert-node", true)
	s.create(t, provider("hook", "generic", s.hookURL, ""), alert("nodes", "hook", source("Node", "*")))
	node := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "storage-1"}
	s.rec.Eventf(node, nil, corev1.EventTypeWarning, "BtrfsHostFull", "BtrfsHostFull", "the btrfs filesystem under /srv/strata is 93.0% full")
	got := s.waitFor(t, 1)
	if got[0].InvolvedObject.Name != "storage-1" || got[0].Reason != "BtrfsHostFull" {
		t.Fatalf("notified %+v", got[0])
	}
}
