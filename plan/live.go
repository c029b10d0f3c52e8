package plan

import (
	"fmt"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/apply"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// compareLive dry-runs the head revision against the cluster and reports,
// per Kustomization, what the offline plan could not see: objects the
// cluster holds differently from the base revision, and objects in the
// live inventory that neither revision has.
func (c *comparison) compareLive() {
	for i := range c.plan.Kustomizations {
		entry := &c.plan.Kustomizations[i]
		k := graph.Key{Namespace: entry.Namespace, Name: entry.Name}
		headKs, r := c.head.ks[k], c.head.renders[k]
		if headKs == nil || r == nil || r.skipped || r.err != nil || entry.Status == "error" {
			continue
		}
		entry.Live = c.liveKustomization(k, headKs, r.objects)
		if entry.Live.Status == "error" {
			c.plan.Errors = append(c.plan.Errors, fmt.Sprintf("Kustomization %s: live comparison: %s", k, entry.Live.Reason))
		}
	}
}

func (c *comparison) liveKustomization(k graph.Key, headKs *kustomizev1.Kustomization, objects []*unstructured.Unstructured) *Live {
	liveKs := &kustomizev1.Kustomization{}
	err := c.live.Get(c.ctx, k, liveKs)
	switch {
	case apierrors.IsNotFound(err):
		return &Live{Status: "absent", Reason: "not in the cluster yet: the engine creates everything it renders"}
	case err != nil:
		return &Live{Status: "error", Reason: err.Error()}
	}
	out := &Live{Status: "compared", Revision: liveKs.Status.LastAppliedRevision}
	if out.Revision != "" && c.plan.Base.Commit != "" && !strings.HasSuffix(out.Revision, c.plan.Base.Commit) {
		out.Reason = "the cluster last applied " + out.Revision + ", not the base revision"
	}
	m := apply.NewResourceManager(c.live, nil)
	head, err := c.prepared(m, headKs, objects)
	if err != nil {
		return &Live{Status: "error", Reason: err.Error()}
	}
	inHead := map[objKey]bool{}
	for _, h := range head {
		inHead[keyOf(h)] = true
		if ch, drifted := c.objectDrift(m, headKs, h); drifted {
			out.Drift = append(out.Drift, ch)
		}
	}
	if liveKs.Status.Inventory != nil {
		for _, ref := range apply.Objects(liveKs.Status.Inventory.Entries) {
			key := keyOf(ref)
			if _, inBase := c.baseOwner[key]; inHead[key] || inBase {
				continue // the offline plan covers it
			}
			if ch, found := c.inventoryOnly(headKs, ref); found {
				out.Drift = append(out.Drift, ch)
			}
		}
	}
	return out
}

// prepared copies objects and makes them what the engine applies.
func (c *comparison) prepared(m *ssa.ResourceManager, ks *kustomizev1.Kustomization, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objects))
	for i, o := range objects {
		out[i] = o.DeepCopy()
	}
	return out, apply.PrepareObjects(c.ctx, m, c.live, c.live, ks, out)
}

// dryRun is one server-side dry-run apply of desired against the cluster.
type dryRun struct {
	action       ssa.Action
	live, merged *unstructured.Unstructured
	err          error
}

func (c *comparison) dryRun(m *ssa.ResourceManager, ks *kustomizev1.Kustomization, desired *unstructured.Unstructured) dryRun {
	entry, live, merged, err := m.Diff(c.ctx, desired, apply.DiffOptions(ks))
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		// Its CRD or Namespace comes in the same apply, in an earlier stage.
		return dryRun{action: ssa.CreatedAction}
	case err != nil:
		return dryRun{err: err}
	}
	return dryRun{action: entry.Action, live: live, merged: merged}
}

// atBase says whether the cluster holds the base revision's version of the
// object, so that the offline plan is exactly what the apply does.
func (c *comparison) atBase(m *ssa.ResourceManager, key objKey, head dryRun) bool {
	owner, inBase := c.baseOwner[key]
	if !inBase {
		return head.action == ssa.CreatedAction
	}
	b := c.base.objects.byKey[key]
	if h := c.head.objects.byKey[key]; h != nil && equalObjects(b, h) {
		return head.err == nil && (head.action == ssa.UnchangedAction || head.action == ssa.SkippedAction)
	}
	base, err := c.prepared(m, c.base.ks[owner], []*unstructured.Unstructured{b})
	if err != nil {
		return false
	}
	r := c.dryRun(m, c.base.ks[owner], base[0])
	return r.err == nil && (r.action == ssa.UnchangedAction || r.action == ssa.SkippedAction)
}

// objectDrift reports what applying h does when that is not what the
// offline plan says.
func (c *comparison) objectDrift(m *ssa.ResourceManager, ks *kustomizev1.Kustomization, h *unstructured.Unstructured) (Change, bool) {
	r := c.dryRun(m, ks, h)
	if r.action == ssa.SkippedAction || c.atBase(m, keyOf(h), r) {
		return Change{}, false
	}
	ch := Change{Object: refOf(h)}
	switch {
	case r.err != nil:
		ch.Action, ch.Risk = Changed, risk.Recreate
		ch.Reasons = []string{"the server-side dry-run against the cluster fails, so the apply will: " + r.err.Error()}
	case r.action == ssa.CreatedAction:
		ch.Action, ch.Risk, ch.Diff = Created, risk.Safe, c.diff(nil, h)
		ch.Reasons = []string{"missing from the cluster (deleted outside Git, or never applied): the apply creates it"}
	case r.action == ssa.ConfiguredAction:
		ch = c.changed(c.live, ks, r.live, r.merged)
		ch.Reasons = append([]string{"the cluster differs from the base revision: the apply changes what is live"}, ch.Reasons...)
	default:
		return Change{}, false // the cluster already holds the head revision's object
	}
	return ch, true
}

// inventoryOnly is an object the cluster's inventory lists that neither
// revision renders: the engine prunes it (through the guard) on the next
// apply, or leaves it when prune is off.
func (c *comparison) inventoryOnly(ks *kustomizev1.Kustomization, ref *unstructured.Unstructured) (Change, bool) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(ref.GroupVersionKind())
	if err := c.live.Get(c.ctx, client.ObjectKeyFromObject(ref), live); err != nil {
		return Change{}, false // already gone
	}
	ch := Change{Object: refOf(live)}
	const cause = "in the cluster's inventory but in neither revision"
	if !ks.Spec.Prune || apply.PruneDisabled(live) {
		ch.Action, ch.Risk, ch.Reasons = Orphaned, risk.Safe, []string{cause + ": left in the cluster, not pruned"}
		return ch, true
	}
	ch.Action = Deleted
	ch.Risk, ch.Reasons = risk.OfDeletion(c.ctx, c.engine, c.live, ks, live, cause)
	c.stopsProtection(&ch, live)
	ch.OptIn = optInFor(ch.Risk)
	return ch, true
}
