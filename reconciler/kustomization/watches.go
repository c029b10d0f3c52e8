package kustomization

import (
	"context"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/graph"
)

const (
	dependsOnIndex = ".strata.dependsOn"
	sourceIndex    = ".strata.sourceRef"
)

func indexFields(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &kustomizev1.Kustomization{}, dependsOnIndex, func(o client.Object) []string {
		var keys []string
		for _, k := range graph.DependencyKeys(o.(*kustomizev1.Kustomization)) {
			keys = append(keys, k.String())
		}
		return keys
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &kustomizev1.Kustomization{}, sourceIndex, func(o client.Object) []string {
		return []string{sourceKey(o.(*kustomizev1.Kustomization)).String()}
	})
}

func sourceKey(ks *kustomizev1.Kustomization) types.NamespacedName {
	ns := ks.Spec.SourceRef.Namespace
	if ns == "" {
		ns = ks.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: ks.Spec.SourceRef.Name}
}

// dependentsOf enqueues the Kustomizations that depend on the changed one,
// so a dependency becoming Ready starts its dependents at once instead of
// at their next poll.
func dependentsOf(c client.Client) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return listRequests(ctx, c, dependsOnIndex, client.ObjectKeyFromObject(o).String())
	})
}

// kustomizationsOfSource enqueues the Kustomizations built from a source
// whose artifact changed.
func kustomizationsOfSource(c client.Client) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return listRequests(ctx, c, sourceIndex, client.ObjectKeyFromObject(o).String())
	})
}

func listRequests(ctx context.Context, c client.Client, index, value string) []reconcile.Request {
	list := &kustomizev1.KustomizationList{}
	if err := c.List(ctx, list, client.MatchingFields{index: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Kustomizations to enqueue", "index", index, "value", value)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, ks := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ks)})
	}
	return reqs
}

// readyOrSpecChanged passes a Kustomization update that can unblock its
// dependents: it became Ready, applied a new revision, its spec changed
// (a cycle may be broken) or it is gone.
type readyOrSpecChanged struct{ predicate.Funcs }

func (readyOrSpecChanged) Create(event.CreateEvent) bool   { return true }
func (readyOrSpecChanged) Delete(event.DeleteEvent) bool   { return true }
func (readyOrSpecChanged) Generic(event.GenericEvent) bool { return false }
func (readyOrSpecChanged) Update(e event.UpdateEvent) bool {
	older, ok1 := e.ObjectOld.(*kustomizev1.Kustomization)
	newer, ok2 := e.ObjectNew.(*kustomizev1.Kustomization)
	if !ok1 || !ok2 {
		return false
	}
	return older.Generation != newer.Generation ||
		status.IsReady(older) != status.IsReady(newer) ||
		older.Status.LastAppliedRevision != newer.Status.LastAppliedRevision
}

// artifactChanged passes a source update that carries a new artifact.
type artifactChanged struct{ predicate.Funcs }

func (artifactChanged) Create(event.CreateEvent) bool   { return true }
func (artifactChanged) Delete(event.DeleteEvent) bool   { return true }
func (artifactChanged) Generic(event.GenericEvent) bool { return false }
func (artifactChanged) Update(e event.UpdateEvent) bool {
	older, ok1 := e.ObjectOld.(*sourcev1.GitRepository)
	newer, ok2 := e.ObjectNew.(*sourcev1.GitRepository)
	if !ok1 || !ok2 || newer.Status.Artifact == nil {
		return false
	}
	return older.Status.Artifact == nil || older.Status.Artifact.Digest != newer.Status.Artifact.Digest ||
		older.Status.Artifact.Revision != newer.Status.Artifact.Revision
}
