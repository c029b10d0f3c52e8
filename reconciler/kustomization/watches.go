package kustomization

import (
	"context"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/graph"
	"github.com/strata-gitops/strata/sources/artifact"
)

const (
	// controllerName names the controller in logs and metrics, as
	// controller-runtime names one made for Kustomizations.
	controllerName = "kustomization"

	dependsOnIndex = ".strata.dependsOn"
	sourceIndex    = ".strata.sourceRef"
)

// watch feeds h from an informer of the manager's cache. The watches
// controller-runtime makes (For, Watches) hold the first reconcile back
// until their handler has seen the informer's whole initial list, and look
// every 100 ms: after a restart that was about 100 ms, a tenth of a
// no-change pass over 1000 Kustomizations. The manager starts no
// controller before its caches have synced, so nothing is missing from
// them; the workers take the initial list as the handler queues it.
func watch(inf cache.Informer, h handler.EventHandler, p ...predicate.Predicate) ctrlsource.Source {
	return &ctrlsource.Informer{Informer: inf, Handler: h, Predicates: p}
}

// requestLogger gives each reconcile's log lines the fields
// controller-runtime gives a controller made with For, so that log queries
// written for Flux's kustomize-controller find strata's lines too.
func requestLogger(base logr.Logger) func(*reconcile.Request) logr.Logger {
	kind := kustomizev1.KustomizationKind
	log := base.WithValues("controller", controllerName, "controllerGroup", kustomizev1.GroupVersion.Group, "controllerKind", kind)
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues(kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}

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
		ks := o.(*kustomizev1.Kustomization)
		return []string{sourceIndexKey(ks.Spec.SourceRef.Kind, sourceKey(ks))}
	})
}

// sourceIndexKey names a source in the index: its kind and key, since a
// GitRepository and an OCIRepository may share a name.
func sourceIndexKey(kind string, key types.NamespacedName) string { return kind + "/" + key.String() }

// sourceWatches watch every source kind for new artifacts, each feeding
// the Kustomizations built from it.
func sourceWatches(ctx context.Context, mgr ctrl.Manager, c client.Client, storage *artifact.Storage) ([]ctrlsource.Source, error) {
	var out []ctrlsource.Source
	for kind, newObject := range sourceKinds {
		inf, err := mgr.GetCache().GetInformer(ctx, newObject())
		if err != nil {
			return nil, fmt.Errorf("watching %s sources: %w", kind, err)
		}
		out = append(out, watch(inf, kustomizationsOfSource(c, storage, kind), artifactChanged{}))
	}
	return out, nil
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
// at their next poll. Dependents that the latest revision touched go first.
func dependentsOf(c client.Client, storage *artifact.Storage) handler.EventHandler {
	enqueue := func(ctx context.Context, o client.Object, q queue) {
		list := &kustomizev1.KustomizationList{}
		if err := c.List(ctx, list, client.MatchingFields{dependsOnIndex: client.ObjectKeyFromObject(o).String()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing dependents", "kustomization", client.ObjectKeyFromObject(o))
			return
		}
		// A dependency's hundred dependents mostly share one source:
		// read it once.
		touches := map[types.NamespacedName]func(path string) bool{}
		for i := range list.Items {
			ks := &list.Items[i]
			src := sourceKey(ks)
			if touches[src] == nil {
				touches[src] = touchedBySource(ctx, c, storage, ks.Spec.SourceRef.Kind, src)
			}
			touched := touches[src](ks.Spec.Path)
			add(q, client.ObjectKeyFromObject(ks), touched, dependentDelay(ks, touched))
		}
	}
	return eventHandler(enqueue)
}

// dependentDelay is how long an untouched dependent waits once its
// dependency moved. One that is Ready only needs the new revision recorded,
// so it keeps the deferral its source gave it: run at once, a dependency's
// hundred such siblings took the workers and the API server from the one
// dependent the push changed (measured: its apply started 160 ms after the
// dependency's, behind 58 status writes). One that is not Ready may have
// been waiting for exactly this dependency, and starts at once.
func dependentDelay(ks *kustomizev1.Kustomization, touched bool) time.Duration {
	if !touched && status.IsReady(ks) && ks.Status.LastAppliedRevision != "" {
		return deferred
	}
	return 0
}

// touchedBySource returns whether the current artifact of the source
// changed files under a path.
func touchedBySource(ctx context.Context, c client.Client, storage *artifact.Storage, kind string, src types.NamespacedName) func(path string) bool {
	newObject, ok := sourceKinds[kind]
	if !ok {
		return func(string) bool { return false }
	}
	obj := newObject()
	if err := c.Get(ctx, src, obj); err != nil || obj.GetArtifact() == nil {
		return func(string) bool { return false }
	}
	digest := obj.GetArtifact().Digest
	return func(path string) bool { return storage.Touches(digest, path) }
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// urgentPriority orders Kustomizations that a push changed ahead of the
// ones it merely re-labels with a new revision, which run at
// routinePriority.
const (
	urgentPriority  = 10
	routinePriority = 0
)

// add queues a Kustomization, urgent ones first; others wait `after`.
func add(q queue, key types.NamespacedName, urgent bool, after time.Duration) {
	req := reconcile.Request{NamespacedName: key}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	switch {
	case ok && urgent:
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(urgentPriority)}, req)
	case urgent || after == 0:
		q.Add(req)
	default:
		q.AddAfter(req, after)
	}
}

func eventHandler(enqueue func(ctx context.Context, o client.Object, q queue)) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { enqueue(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) { enqueue(ctx, e.ObjectNew, q) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { enqueue(ctx, e.Object, q) },
	}
}

// deferred is how long Kustomizations that a new revision does not touch
// wait, so the ones it does touch are applied first.
const deferred = 2 * time.Second

// kustomizationsOfSource enqueues the Kustomizations built from a source
// whose artifact changed: at once those whose path the revision touched,
// and their dependencies; the rest shortly after. Every one is reconciled.
func kustomizationsOfSource(c client.Client, storage *artifact.Storage, kind string) handler.EventHandler {
	enqueue := func(ctx context.Context, o client.Object, q queue) {
		list := &kustomizev1.KustomizationList{}
		if err := c.List(ctx, list, client.MatchingFields{sourceIndex: sourceIndexKey(kind, client.ObjectKeyFromObject(o))}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing Kustomizations of a source", "source", client.ObjectKeyFromObject(o))
			return
		}
		first := touched(o, list.Items, storage)
		for i := range list.Items {
			key := client.ObjectKeyFromObject(&list.Items[i])
			add(q, key, first[key], deferred)
		}
	}
	return eventHandler(enqueue)
}

// touched returns the Kustomizations whose path the source's new revision
// changed, plus everything they depend on (a dependent waits for its
// dependencies to record the revision).
func touched(o client.Object, items []kustomizev1.Kustomization, storage *artifact.Storage) map[types.NamespacedName]bool {
	first := map[types.NamespacedName]bool{}
	src, ok := o.(sourceObject)
	all := make([]*kustomizev1.Kustomization, len(items))
	for i := range items {
		all[i] = &items[i]
	}
	g := graph.Of(all)
	var mark func(k types.NamespacedName)
	mark = func(k types.NamespacedName) {
		if first[k] {
			return
		}
		first[k] = true
		for _, d := range g[k] {
			mark(d)
		}
	}
	for i := range items {
		if !ok || src.GetArtifact() == nil || storage.Touches(src.GetArtifact().Digest, items[i].Spec.Path) {
			mark(client.ObjectKeyFromObject(&items[i]))
		}
	}
	return first
}

// readyOrSpecChanged passes a Kustomization update that can unblock its
// dependents: it became Ready, got its first result (ready or not),
// applied a new revision, its spec changed (a cycle may be broken) or it
// is gone.
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
		inProgress(older) != inProgress(newer) || // dependents wait quietly while it is in progress
		older.Status.LastAppliedRevision != newer.Status.LastAppliedRevision
}

// artifactChanged passes a source update that carries a new artifact, or
// that ends a first fetch without one (Kustomizations wait quietly for it).
type artifactChanged struct{ predicate.Funcs }

func (artifactChanged) Create(event.CreateEvent) bool   { return true }
func (artifactChanged) Delete(event.DeleteEvent) bool   { return true }
func (artifactChanged) Generic(event.GenericEvent) bool { return false }
func (artifactChanged) Update(e event.UpdateEvent) bool {
	older, ok1 := e.ObjectOld.(sourceObject)
	newer, ok2 := e.ObjectNew.(sourceObject)
	if !ok1 || !ok2 {
		return false
	}
	oa, na := older.GetArtifact(), newer.GetArtifact()
	if na == nil {
		return fetching(older) != fetching(newer)
	}
	return oa == nil || oa.Digest != na.Digest || oa.Revision != na.Revision
}
