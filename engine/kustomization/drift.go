package kustomization

import (
	"context"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/engine/apply"
	"github.com/strata-gitops/strata/engine/build"
	"github.com/strata-gitops/strata/internal/status"
)

// liveSyncTimeout bounds the wait for the live-object cache to list a kind
// for the first time; a kind the controller may not list falls back to
// dry-runs.
const liveSyncTimeout = 10 * time.Second

// NewLiveCache returns a cache of the metadata (no managedFields) of every
// object a Kustomization applied, found by the owner label the engine sets.
// Its resourceVersions are what a reconcile compares with its appliedRecord.
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

// warmLive loads every stored record and registers, to start side by
// side, the metadata informers of the kinds they list. Otherwise the
// first reconciles after a start read the records one file at a time and
// start each informer as they first need it, one after another.
func (r *Reconciler) warmLive(ctx context.Context) {
	informers, ok := r.Live.(cache.Informers)
	if !ok {
		return
	}
	for _, gvk := range r.records.loadAll() {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(gvk)
		if _, err := informers.GetInformer(ctx, live, cache.BlockUntilSynced(false)); err != nil {
			log.FromContext(ctx).Info("not watching a recorded kind ahead; its first reconcile will", "kind", gvk.String(), "reason", err.Error())
		}
	}
}

// inSync reports whether every object rec lists still has the
// resourceVersion the last apply left, so that applying the same render
// again would change nothing.
func (r *Reconciler) inSync(ctx context.Context, rec appliedRecord) bool {
	if r.Live == nil || len(rec.Objects) == 0 {
		return false
	}
	for _, o := range rec.Objects {
		gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
		if _, failed := r.unlistable.Load(gvk); failed {
			return false
		}
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(gvk)
		getCtx, cancel := context.WithTimeout(ctx, liveSyncTimeout)
		err := r.Live.Get(getCtx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, live)
		cancel()
		if err != nil && getCtx.Err() != nil && ctx.Err() == nil {
			r.unlistable.Store(gvk, true)
		}
		if err != nil || live.ResourceVersion != o.ResourceVersion {
			return false
		}
	}
	return true
}

// unchangedRender reports whether the render obj just built is the one it
// last applied, with the same spec, and the cluster still holds exactly
// what that apply left.
func (r *Reconciler) unchangedRender(ctx context.Context, obj *kustomizev1.Kustomization, rec appliedRecord, digest string) bool {
	return digest != "" && rec.Digest == digest && r.applyUnneeded(obj, rec) && r.inSync(ctx, rec)
}

// untouchedSource reports, without building or extracting the artifact,
// that a new revision cannot change what obj renders: it changed no file
// under obj's path relative to the revision obj last applied, obj's last
// render read nothing outside that path (so neither can this one: what it
// reads is named by the same, unchanged, files), and the cluster still
// holds what that apply left.
func (r *Reconciler) untouchedSource(ctx context.Context, obj *kustomizev1.Kustomization, rec appliedRecord, src *source) bool {
	return src.revision != obj.Status.LastAppliedRevision && rec.SelfContained && r.applyUnneeded(obj, rec) &&
		r.Storage.Untouched(src.digest, obj.Status.LastAppliedRevision, obj.Spec.Path) &&
		r.inSync(ctx, rec)
}

// sameArtifact reports, without building or even extracting the
// artifact, that obj renders what it last applied: its source's artifact
// is byte for byte the one that render was made from, by this same
// program, with the same spec, and that render read nothing but the
// artifact; and the cluster still holds what the apply left.
func (r *Reconciler) sameArtifact(ctx context.Context, obj *kustomizev1.Kustomization, rec appliedRecord, src *source) bool {
	return rec.SelfContained && rec.Artifact != "" && rec.Artifact == src.digest && rec.Renderer != "" && rec.Renderer == build.Renderer() &&
		r.applyUnneeded(obj, rec) && r.inSync(ctx, rec)
}

// applyUnneeded holds when obj's last reconcile succeeded with its current
// spec, left no deletion blocked (a blocked one is retried on every
// reconcile, in case the opt-in was added), and rec is the record of that
// apply. Only a Ready Kustomization may skip: a failing one runs its phases
// again whatever changed.
func (r *Reconciler) applyUnneeded(obj *kustomizev1.Kustomization, rec appliedRecord) bool {
	return obj.Status.Inventory != nil && status.IsReady(obj) &&
		apimeta.FindStatusCondition(obj.Status.Conditions, DataProtectedCondition) == nil &&
		obj.Status.ObservedGeneration == obj.Generation && rec.Generation == obj.Generation
}

// versionRecorder remembers the resourceVersion of every object the apply
// engine read or patched (dry-run or not), so that after an apply the
// record holds each object's version as the server last returned it.
type versionRecorder struct {
	client.Client
	mu   sync.Mutex
	seen map[object.ObjMetadata]string
}

func newVersionRecorder(c client.Client) *versionRecorder {
	return &versionRecorder{Client: c, seen: map[object.ObjMetadata]string{}}
}

func (v *versionRecorder) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := v.Client.Get(ctx, key, obj, opts...)
	v.note(obj, err)
	return err
}

func (v *versionRecorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := v.Client.Patch(ctx, obj, patch, opts...)
	v.note(obj, err)
	return err
}

func (v *versionRecorder) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := v.Client.Delete(ctx, obj, opts...)
	v.mu.Lock()
	delete(v.seen, apply.ObjMetadata(obj))
	v.mu.Unlock()
	return err
}

func (v *versionRecorder) note(obj client.Object, err error) {
	if err != nil || obj.GetResourceVersion() == "" {
		return
	}
	v.mu.Lock()
	v.seen[apply.ObjMetadata(obj)] = obj.GetResourceVersion()
	v.mu.Unlock()
}

// record returns the appliedRecord of objects, or false when the apply
// did not show the version of one of them.
func (v *versionRecorder) record(obj *kustomizev1.Kustomization, digest string, objects []*unstructured.Unstructured) (appliedRecord, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rec := appliedRecord{Generation: obj.Generation, Digest: digest}
	for _, o := range objects {
		rv, ok := v.seen[apply.ObjMetadata(o)]
		if !ok {
			return appliedRecord{}, false
		}
		rec.Objects = append(rec.Objects, objVersion{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
			Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: rv,
		})
	}
	return rec, true
}
