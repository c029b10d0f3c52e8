package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// alertsToTheHost lets strata's Providers send to the host, where the
// suite's webhook receivers listen.
func alertsToTheHost() string {
	return "notifications.allowedHosts={" + network.HostIP().String() + "}"
}

// notified is one notification as a webhook receiver on the host got it.
type notified struct {
	event eventv1.Event
	at    time.Time
}

// receiver is a generic webhook receiver on the host's address on the
// cluster's bridge, which the controller's pod reaches.
type receiver struct {
	mu  sync.Mutex
	got []notified
	url string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var e eventv1.Event
	if json.Unmarshal(body, &e) == nil {
		r.mu.Lock()
		r.got = append(r.got, notified{event: e, at: at})
		r.mu.Unlock()
	}
}

// find returns the notification with the reason, if one came.
func (r *receiver) find(reason string) (notified, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.got {
		if n.event.Reason == reason {
			return n, true
		}
	}
	return notified{}, false
}

// alertOnFailovers starts a receiver on the host and has strata send it
// every event of the namespace's Failovers, through a generic Provider
// and an Alert, as a user would set them up.
func alertOnFailovers(t testing.TB, cl client.Client, ns string) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(network.HostIP().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/"}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for _, o := range []client.Object{
		&notificationv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host"},
			Spec: notificationv1beta3.ProviderSpec{Type: notificationv1beta3.GenericProvider, Address: r.url}},
		&notificationv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "failovers"},
			Spec: notificationv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "host"},
				EventSources: []notificationv1.CrossNamespaceObjectReference{{Kind: "Failover", Name: "*"}}}},
	} {
		if err := cl.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// wantNotified waits for the notification of the Failover's event with
// the reason, and checks it came within 2 s of the event the controller
// recorded; it returns the notification.
func (r *receiver) wantNotified(t testing.TB, cl client.Client, ns, reason string) notified {
	t.Helper()
	var n notified
	testenv.Eventually(t, 2*time.Minute, func() error {
		var ok bool
		if n, ok = r.find(reason); !ok {
			return fmt.Errorf("no %s notification at %s yet", reason, r.url)
		}
		return nil
	})
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind != "Failover" || e.Reason != reason || e.Note != n.event.Message {
			continue
		}
		recorded := e.EventTime.Time
		if late := n.at.Sub(recorded); late > 2*time.Second {
			t.Fatalf("%s reached the webhook %s after the controller recorded it; want within 2 s", reason, late)
		}
		t.Logf("%s at the webhook %s after the controller recorded it: %s", reason, n.at.Sub(recorded).Round(time.Millisecond), n.event.Message)
		return n
	}
	t.Fatalf("the %s notification (%q) matches no event the controller recorded", reason, n.event.Message)
	return n
}
