// Object-level changes of one Kustomization: created, changed and removed
// objects with their risk.

package plan

import (
	"fmt"
	"reflect"
	"sort"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/apply"
	"github.com/strata-gitops/strata/reconciler/graph"
	"github.com/strata-gitops/strata/reconciler/guard"
)

// owners maps each object a side renders to the Kustomization that applies it.
func owners(s *side) map[objKey]graph.Key {
	out := map[objKey]graph.Key{}
	for k, r := range s.renders {
		if r.err != nil {
			continue
		}
		for _, o := range r.objects {
			out[keyOf(o)] = k
		}
	}
	return out
}

// objectChanges compares one Kustomization's objects.
func (c *comparison) objectChanges(k graph.Key, baseKs, headKs *kustomizev1.Kustomization, baseObjs, headObjs []*unstructured.Unstructured) ([]Change, int) {
	before := map[objKey]*unstructured.Unstructured{}
	for _, o := range baseObjs {
		before[keyOf(o)] = o
	}
	var changes []Change
	unchanged := 0
	for _, h := range headObjs {
		key := keyOf(h)
		b, movedFrom := before[key], ""
		if b == nil {
			if owner, ok := c.baseOwner[key]; ok && owner != k {
				b, movedFrom = c.base.objects.byKey[key], owner.String()
			}
		}
		switch {
		case b == nil:
			changes = append(changes, c.created(headKs, h))
		case equalObjects(b, h) && h.GroupVersionKind().GroupKind() == helmReleaseKind && c.valuesInputsDiffer(b, h):
			ch := Change{Action: Changed, Object: refOf(h), Risk: risk.Safe, MovedFrom: movedFrom,
				Reasons: []string{"a ConfigMap or Secret of its valuesFrom changes"}}
			c.helmChange(&ch, b, h)
			changes = append(changes, ch)
		case equalObjects(b, h):
			unchanged++
			if movedFrom != "" {
				ch := Change{Action: Changed, Object: refOf(h), Risk: risk.Safe, MovedFrom: movedFrom,
					Reasons: []string{"now applied by this Kustomization; nothing in the object changes"}}
				c.prunedWhileMoving(&ch, c.baseOwner[key], k, b)
				changes = append(changes, ch)
			}
		default:
			ch := c.changed(c.base.objects, headKs, b, h)
			ch.MovedFrom = movedFrom
			if h.GroupVersionKind().GroupKind() == helmReleaseKind {
				c.helmChange(&ch, b, h)
			}
			if movedFrom != "" {
				c.prunedWhileMoving(&ch, c.baseOwner[key], k, b)
			}
			changes = append(changes, ch)
		}
	}
	after := map[objKey]bool{}
	for _, o := range headObjs {
		after[keyOf(o)] = true
	}
	for _, b := range baseObjs {
		key := keyOf(b)
		if after[key] {
			continue
		}
		if owner, ok := c.headOwner[key]; ok && owner != k {
			continue // moved: reported by its new Kustomization
		}
		changes = append(changes, c.removed(baseKs, headKs, b))
	}
	sort.SliceStable(changes, func(i, j int) bool {
		if changes[i].Action != changes[j].Action {
			return actionOrder[changes[i].Action] < actionOrder[changes[j].Action]
		}
		return changes[i].Object.String() < changes[j].Object.String()
	})
	return changes, unchanged
}

var actionOrder = map[string]int{Deleted: 0, Changed: 1, Created: 2, Orphaned: 3}

func refOf(o *unstructured.Unstructured) ObjectRef {
	return ObjectRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

func (c *comparison) created(ks *kustomizev1.Kustomization, h *unstructured.Unstructured) Change {
	ch := Change{Action: Created, Object: refOf(h), Risk: risk.Safe, Diff: c.diff(nil, h)}
	if h.GroupVersionKind().GroupKind() == helmReleaseKind {
		c.helmChange(&ch, nil, h)
	}
	return ch
}

// changed judges a change from b to h; cluster answers the guard's
// questions about what exists (offline, the base revision).
func (c *comparison) changed(cluster client.Reader, ks *kustomizev1.Kustomization, b, h *unstructured.Unstructured) Change {
	ch := Change{Action: Changed, Object: refOf(h), Diff: c.diff(b, h)}
	ch.Risk, ch.Reasons = risk.Classify(c.ctx, c.engine, cluster, c.head.objects, ks, b, h)
	if reason := c.protectors.Pausing(b, h); reason != "" {
		ch.Risk, ch.Reasons = risk.Raise(ch.Risk, ch.Reasons, risk.Disruptive, reason)
	}

	ch.OptIn = optInFor(ch.Risk)
	return ch
}

// removed is an object that left Git: deleted when the engine prunes it
// (spec.prune, or the deletionPolicy of a removed Kustomization), else
// orphaned. Deletions go through the data-loss guard.
func (c *comparison) removed(baseKs, headKs *kustomizev1.Kustomization, b *unstructured.Unstructured) Change {
	ch := Change{Object: refOf(b), Diff: c.diff(b, nil)}
	if !deletes(baseKs, headKs) || apply.PruneDisabled(b) {
		ch.Action, ch.Risk = Orphaned, risk.Safe
		ch.Reasons = []string{"left in the cluster: not pruned"}
		return ch
	}
	ch.Action = Deleted
	ch.Risk, ch.Reasons = risk.OfDeletion(c.ctx, c.engine, c.base.objects, owner(baseKs, headKs), b, "removed from Git")
	c.stopsProtection(&ch, b)
	if b.GroupVersionKind().GroupKind() == helmReleaseKind {
		c.helmChange(&ch, b, nil) // helm uninstalls what it installed
	}
	ch.OptIn = optInFor(ch.Risk)
	return ch
}

// prunedWhileMoving judges an object that moves from one Kustomization to
// another on a Flux cluster: the old one, pruned or deleted, deletes what
// still carries its name's labels, racing the new one's apply, so an
// object that holds data can be deleted and made again empty
// (fluxcd/flux2#3316). strata's engine keeps it: its guard refuses the
// prune.
func (c *comparison) prunedWhileMoving(ch *Change, from, to graph.Key, b *unstructured.Unstructured) {
	if c.engine != risk.Flux {
		return
	}
	oldKs, stays := c.head.ks[from]
	prunes := stays && oldKs.Spec.Prune || !stays && apply.DeletesOnRemoval(c.base.ks[from])
	if !prunes {
		return
	}
	reason, err := guard.Reason(c.ctx, c.base.objects, b)
	if err != nil || reason == "" {
		return
	}
	how := "prunes it"
	if !stays {
		how = "is deleted, and its deletion prunes it"
	}
	ch.Risk, ch.Reasons = risk.Raise(ch.Risk, ch.Reasons, risk.DestroysData,
		fmt.Sprintf("moves from %s to %s: on Flux, %s %s while it still carries %s's labels, racing %s's apply; %s, so it can be deleted and made again empty",
			from, to, from, how, from.Name, to, reason))
}

// stopsProtection makes a deletion the guard lets through disruptive
// when the object protects data (risk.Protectors): backups, snapshots and
// standby copies, which no reviewer should lose without noticing.
func (c *comparison) stopsProtection(ch *Change, o *unstructured.Unstructured) {
	if ch.Risk != risk.Safe {
		return
	}
	if reason := c.protectors.Removal(o); reason != "" {
		ch.Risk, ch.Reasons = risk.Raise(ch.Risk, ch.Reasons, risk.Disruptive, reason)
	}
}

// optInFor names the opt-in a blocked deletion needs.
func optInFor(class string) string {
	if class != risk.Blocked {
		return ""
	}
	return guard.OptInAnnotation + `: "true"`
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	return reflect.DeepEqual(a.Object, b.Object)
}

func owner(baseKs, headKs *kustomizev1.Kustomization) *kustomizev1.Kustomization {
	if headKs != nil {
		return headKs
	}
	return baseKs
}

// deletes says whether the engine deletes objects that left Git: prune
// for a Kustomization that stays, its deletionPolicy for one removed.
func deletes(baseKs, headKs *kustomizev1.Kustomization) bool {
	if headKs != nil {
		return headKs.Spec.Prune
	}
	return apply.DeletesOnRemoval(baseKs)
}
