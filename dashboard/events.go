package dashboard

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// eventsShown is how many of a Kustomization's latest events its row
// shows.
const eventsShown = 3

// KustomizationEventsSelector selects the Events of Kustomizations: the
// controller's cache keeps only those for the GitOps page, not every
// Event of the cluster.
var KustomizationEventsSelector = fields.OneTermEqualSelector("involvedObject.kind", "Kustomization")

// EventView is one event of an object.
type EventView struct {
	Type, Reason, Message string
	At                    time.Time
}

// latestEvents are each Kustomization's latest events ("namespace/name"
// → newest first), from the cache.
func latestEvents(events []*corev1.Event) map[string][]EventView {
	out := map[string][]EventView{}
	for _, e := range events {
		if e.InvolvedObject.Kind != "Kustomization" {
			continue
		}
		key := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		out[key] = append(out[key], EventView{Type: e.Type, Reason: e.Reason, Message: e.Message, At: eventTime(e)})
	}
	for key, es := range out {
		slices.SortFunc(es, func(a, b EventView) int { return cmp.Compare(b.At.UnixNano(), a.At.UnixNano()) })
		out[key] = es[:min(len(es), eventsShown)]
	}
	return out
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time} {
		if !t.IsZero() {
			return t
		}
	}
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		return e.Series.LastObservedTime.Time
	}
	return e.CreationTimestamp.Time
}
