package alerts

import (
	"context"
	"regexp"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// matchingAlerts are the Alerts, not suspended, that take e: one of its
// event sources names e's object, its severity admits e's, and its
// inclusion and exclusion lists let e's message through.
func (d *Dispatcher) matchingAlerts(ctx context.Context, e eventv1.Event) ([]notificationv1beta3.Alert, error) {
	var all notificationv1beta3.AlertList
	var opts []client.ListOption
	if d.Selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: d.Selector})
	}
	if err := d.Client.List(ctx, &all, opts...); err != nil {
		return nil, err
	}
	var out []notificationv1beta3.Alert
	for _, a := range all.Items {
		if a.Spec.Suspend || !severityAdmits(a.Spec.EventSeverity, e.Severity) || !d.messageAdmitted(&a, e.Message) {
			continue
		}
		for _, src := range a.Spec.EventSources {
			if d.sourceMatches(ctx, &a, src, e) {
				out = append(out, a)
				break
			}
		}
	}
	return out, nil
}

// severityAdmits: an Alert of severity error takes errors only; info (the
// default) takes every event.
func severityAdmits(alert, event string) bool {
	return alert != eventv1.EventSeverityError || event == eventv1.EventSeverityError
}

// messageAdmitted applies the Alert's lists of regular expressions: with
// an inclusion list, the message must match one; it must match no
// exclusion. An expression that does not compile is skipped, with an
// event on the Alert naming it.
func (d *Dispatcher) messageAdmitted(a *notificationv1beta3.Alert, message string) bool {
	if len(a.Spec.InclusionList) > 0 && !d.anyMatches(a, a.Spec.InclusionList, message) {
		return false
	}
	return !d.anyMatches(a, a.Spec.ExclusionList, message)
}

func (d *Dispatcher) anyMatches(a *notificationv1beta3.Alert, expressions []string, message string) bool {
	for _, exp := range expressions {
		re, err := regexp.Compile(exp)
		if err != nil {
			d.warn(a, "InvalidExpression", "the expression %q does not compile, so it is skipped: %v", exp, err)
			continue
		}
		if re.MatchString(message) {
			return true
		}
	}
	return false
}

// sourceMatches reports whether src names e's object: the kind, the
// namespace (the Alert's when empty), and the name, or "*" with the
// object's labels matching src.matchLabels.
func (d *Dispatcher) sourceMatches(ctx context.Context, a *notificationv1beta3.Alert, src notificationv1.CrossNamespaceObjectReference, e eventv1.Event) bool {
	obj := e.InvolvedObject
	ns := src.Namespace
	if ns == "" {
		ns = a.Namespace
	}
	// A cluster-scoped object (a Node, whose events say a btrfs host is
	// full) is in no namespace: any Alert naming its kind may take it,
	// but not under the multi-tenancy lockdown.
	clusterScoped := obj.Namespace == ""
	if src.Kind != obj.Kind || (!clusterScoped && ns != obj.Namespace) {
		return false
	}
	if d.NoCrossNamespaceRefs && obj.Namespace != a.Namespace {
		d.warn(a, "CrossNamespaceRefused", "events of %s %s/%s are not sent: cross-namespace event sources are refused on this cluster", obj.Kind, obj.Namespace, obj.Name)
		return false
	}
	if src.Name != "*" {
		return src.Name == obj.Name
	}
	if len(src.MatchLabels) == 0 {
		return true
	}
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(obj.GroupVersionKind())
	if err := d.Direct.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: obj.Name}, &m); err != nil {
		d.Log.Error(err, "labels of an event's object not read; the event source with matchLabels does not match", "kind", obj.Kind, "name", obj.Name)
		return false
	}
	return labels.SelectorFromSet(src.MatchLabels).Matches(labels.Set(m.GetLabels()))
}
