package skipapply

import (
	"context"
	"sync"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Memo is the skip-apply layer's memory: the Records of the last applies
// and the live cache that says whether the cluster still holds what each
// left.
type Memo struct {
	Records Records
	// Live caches the metadata of applied objects (NewLiveCache); nil
	// never skips an apply.
	Live client.Reader
	// unlistable are the kinds Live failed to list in time: the
	// controller may not list them, so their objects are dry-run.
	unlistable sync.Map
}

// liveSyncTimeout bounds the wait for the live-object cache to list a kind
// for the first time; a kind the controller may not list falls back to
// dry-runs.
const liveSyncTimeout = 10 * time.Second

// NewLiveCache returns a cache of the metadata (no managedFields) of every
// object a Kustomization applied, found by the owner label the engine sets.
// Its resourceVersions are what a reconcile compares with its Record.
// A kind is listed and watched from the first time a reconcile asks.
func NewLiveCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	owned, err := labels.NewRequirement(kustomizev1.GroupVersion.Group+"/name", selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	opts.DefaultLabelSelector = labels.NewSelector().Add(*owned)
	opts.DefaultTransform = cache.TransformStripManagedFields()
	return cache.New(cfg, opts)
}

// Warm loads every stored record and registers, to start side by
// side, the metadata informers of the kinds they list. Otherwise the
// first reconciles after a start read the records one file at a time and
// start each informer as they first need it, one after another.
func (m *Memo) Warm(ctx context.Context) {
	informers, ok := m.Live.(cache.Informers)
	if !ok {
		return
	}
	for _, gvk := range m.Records.LoadAll() {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(gvk)
		if _, err := informers.GetInformer(ctx, live, cache.BlockUntilSynced(false)); err != nil {
			log.FromContext(ctx).Info("not watching a recorded kind ahead; its first reconcile will", "kind", gvk.String(), "reason", err.Error())
		}
	}
}

// InSync reports whether every object rec lists still has the
// resourceVersion the last apply left, so that applying the same render
// again would change nothing.
func (m *Memo) InSync(ctx context.Context, rec Record) bool {
	if m.Live == nil || len(rec.Objects) == 0 {
		return false
	}
	for _, o := range rec.Objects {
		gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
		if _, failed := m.unlistable.Load(gvk); failed {
			return false
		}
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(gvk)
		getCtx, cancel := context.WithTimeout(ctx, liveSyncTimeout)
		err := m.Live.Get(getCtx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, live)
		cancel()
		if err != nil && getCtx.Err() != nil && ctx.Err() == nil {
			m.unlistable.Store(gvk, true)
		}
		if err != nil || live.ResourceVersion != o.ResourceVersion {
			return false
		}
	}
	return true
}
