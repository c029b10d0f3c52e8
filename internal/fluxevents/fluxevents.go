// Package fluxevents records strata's events twice: as Kubernetes events,
// and, when an events address is set (--events-addr), posted in Flux's
// format to Flux's notification-controller with Flux's own recorder
// (fluxcd/pkg/runtime/events), so that Flux's Alerts and Providers route
// a Failover, a ReplicationSource or a Kustomization of strata's as they
// route Flux's own objects. The payload carries the object's kind and,
// for what has one, the revision.
package fluxevents

import (
	"encoding/json"
	"fmt"
	"os"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	"github.com/fluxcd/pkg/apis/meta"
	fluxevents "github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Recorder is a Kubernetes event recorder that also posts each event to
// Flux's notification-controller.
type Recorder struct {
	kube   events.EventRecorder
	flux   *fluxevents.Recorder
	scheme *runtime.Scheme
	// posts queues events for the one goroutine that posts them: Flux's
	// recorder retries for seconds against an endpoint that is down, and
	// no reconcile (a failover's promotion least of all) may wait for it.
	posts chan post
	log   logr.Logger
}

// post is one event to send.
type post struct {
	obj               runtime.Object
	meta              map[string]string
	eventtype, reason string
	messageFmt        string
	args              []any
}

// queueLength bounds the events waiting to be posted; past it they are
// dropped (and logged), never waited for.
const queueLength = 1000

var _ events.EventRecorder = Recorder{}

// New wraps kube; with an empty address it records Kubernetes events
// only. controller names the reporting controller in the payload.
func New(kube events.EventRecorder, scheme *runtime.Scheme, log logr.Logger, address, controller string) (Recorder, error) {
	if address == "" {
		return Recorder{kube: kube}, nil
	}
	flux, err := fluxevents.NewRecorderForScheme(scheme, discard{}, log, address, controller)
	if err != nil {
		return Recorder{}, fmt.Errorf("--events-addr %q: %w", address, err)
	}
	r := Recorder{kube: kube, flux: flux, scheme: scheme, posts: make(chan post, queueLength), log: log}
	go r.send()
	return r, nil
}

// send posts the queued events, one after the other, for the life of the
// process.
func (r Recorder) send() {
	for p := range r.posts {
		if ref, err := reference.GetReference(r.scheme, p.obj); err == nil && ref.Namespace == "" {
			r.postClusterScoped(ref, p)
			continue
		}
		r.flux.AnnotatedEventf(p.obj, p.meta, p.eventtype, p.reason, p.messageFmt, p.args...)
	}
}

// postClusterScoped posts the event of an object in no namespace (a
// Node: a btrfs host full, an image job), which Flux's recorder refuses
// to post since Flux's kinds are all namespaced. The payload is the same
// eventv1.Event, sent with the recorder's own retrying client; strata's
// Alerts take it (an Alert naming kind Node), Flux's notification-
// controller matches it to none.
func (r Recorder) postClusterScoped(ref *corev1.ObjectReference, p post) {
	severity := eventv1.EventSeverityInfo
	if p.eventtype == corev1.EventTypeWarning {
		severity = eventv1.EventSeverityError
	}
	host, _ := os.Hostname()
	body, err := json.Marshal(eventv1.Event{InvolvedObject: *ref, Severity: severity, Timestamp: metav1.Now(),
		Message: fmt.Sprintf(p.messageFmt, p.args...), Reason: p.reason, Metadata: p.meta,
		ReportingController: r.flux.ReportingController, ReportingInstance: host})
	if err == nil {
		_, err = r.flux.Client.Post(r.flux.Webhook, "application/json", body)
	}
	if err != nil {
		r.log.Error(err, "event not posted", "kind", ref.Kind, "name", ref.Name, "reason", p.reason)
	}
}

// Eventf records the event, and posts it.
func (r Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.eventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// Eventf records an event through rec with metadata (keys without an API
// group: "dataAge") that Flux's payload carries under the object's group
// ("failover.strata.dev/dataAge"), where Alerts' Providers show it. A
// recorder that posts nowhere records the event alone.
func Eventf(rec events.EventRecorder, meta map[string]string, regarding runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r, ok := rec.(Recorder); ok {
		r.eventf(regarding, nil, meta, eventtype, reason, action, note, args...)
		return
	}
	rec.Eventf(regarding, nil, eventtype, reason, action, note, args...)
}

func (r Recorder) eventf(regarding, related runtime.Object, extra map[string]string, eventtype, reason, action, note string, args ...any) {
	r.kube.Eventf(regarding, related, eventtype, reason, action, note, args...)
	if r.flux == nil {
		return
	}
	p := post{obj: regarding.DeepCopyObject(), meta: r.metadata(regarding, extra), eventtype: eventtype, reason: reason, messageFmt: note, args: args}
	select {
	case r.posts <- p:
	default:
		r.log.Info("event not posted to the notification-controller: too many waiting", "reason", reason)
	}
}

// metadata holds the revision of what has one, under the key Flux's
// controllers use (the object's API group, then "/revision"): a source's
// artifact, a Kustomization's attempted revision; and the extra
// metadata, under the same group.
func (r Recorder) metadata(obj runtime.Object, extra map[string]string) map[string]string {
	rev := ""
	switch o := obj.(type) {
	case *kustomizev1.Kustomization:
		rev = o.Status.LastAttemptedRevision
	case interface{ GetArtifact() *meta.Artifact }:
		if a := o.GetArtifact(); a != nil {
			rev = a.Revision
		}
	}
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil || (rev == "" && len(extra) == 0) {
		return nil
	}
	out := map[string]string{}
	for k, v := range extra {
		out[gvk.Group+"/"+k] = v
	}
	if rev != "" {
		out[gvk.Group+"/"+eventv1.MetaRevisionKey] = rev
	}
	return out
}

// discard is the Kubernetes half of Flux's recorder, unused: strata
// records its Kubernetes events with its own recorder.
type discard struct{}

func (discard) Event(runtime.Object, string, string, string)          {}
func (discard) Eventf(runtime.Object, string, string, string, ...any) {}
func (discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

var _ record.EventRecorder = discard{}
