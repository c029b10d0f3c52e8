// Package outcome records what a source reconciler's fetch came to, the
// same way for every kind strata serves (GitRepository, OCIRepository,
// Bucket): Flux's conditions and events, the old artifacts collected once
// a new one is in status, and the artifacts removed when the object goes.
package outcome

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/predicates"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/strata-gitops/strata/internal/finalizer"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/sources/artifact"
)

// Finalizer is Flux's finalizer, so objects move between Flux and strata.
const Finalizer = "finalizers.fluxcd.io"

// Source is a source object: its artifact and its conditions.
type Source interface {
	status.Conditioned
	GetArtifact() *meta.Artifact
}

// Recorder records outcomes for one kind of source.
type Recorder struct {
	Kind    string
	Storage *artifact.Storage
	Events  events.EventRecorder
}

// ObjectDir is where obj's artifacts are stored.
func (r Recorder) ObjectDir(obj client.Object) string {
	return artifact.ObjectDir(r.Kind, obj.GetNamespace(), obj.GetName())
}

// Succeed marks obj Ready with the artifact in its status.
func (r Recorder) Succeed(obj Source) {
	msg := fmt.Sprintf("stored artifact for revision '%s'", obj.GetArtifact().Revision)
	status.Remove(obj, sourcev1.FetchFailedCondition)
	status.Set(obj, sourcev1.ArtifactInStorageCondition, metav1.ConditionTrue, meta.SucceededReason, msg)
	status.MarkReady(obj, meta.SucceededReason, msg)
}

// Fail records msg in status and a Warning event. msg must hold no
// credential: each kind hides its own (a URL's password) before.
func (r Recorder) Fail(obj Source, reason, msg string) {
	status.Set(obj, sourcev1.FetchFailedCondition, metav1.ConditionTrue, reason, msg)
	status.MarkFailed(obj, reason, msg, false)
	r.Events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Fetch", "%s", msg)
}

// Stored announces a new artifact, as Flux's NewArtifact event does.
func (r Recorder) Stored(obj Source, format string, args ...any) {
	r.Events.Eventf(obj, nil, corev1.EventTypeNormal, "NewArtifact", "Store", format, args...)
}

// garbageCollectionFailedReason is the event reason Flux's
// source-controller uses for the same failure.
const garbageCollectionFailedReason = "GarbageCollectionFailed"

// CollectGarbage removes the artifacts older than the previous one once a
// new one is in status: consumers learn of the new revision without
// waiting for thousands of old files to be unlinked. A failure leaves old
// files for the next new artifact to remove; it is reported, not retried.
func (r Recorder) CollectGarbage(obj Source, previous *meta.Artifact) {
	current := obj.GetArtifact()
	if current == nil || (previous != nil && previous.Digest == current.Digest) {
		return
	}
	dir := r.ObjectDir(obj)
	if err := r.Storage.GarbageCollect(dir, current, previous); err != nil {
		r.Events.Eventf(obj, nil, corev1.EventTypeWarning, garbageCollectionFailedReason, "GarbageCollect",
			"removing old artifacts of %s: %v", dir, err)
	}
}

// Finalize removes obj's artifacts, then its finalizer.
func (r Recorder) Finalize(ctx context.Context, c client.Client, obj client.Object) error {
	if err := r.Storage.Remove(r.ObjectDir(obj)); err != nil {
		return err
	}
	return finalizer.Release(ctx, c, obj, Finalizer)
}

// Steps are what differs between the source kinds' reconciles, read from
// the object Reconcile fills.
type Steps struct {
	// Suspended is spec.suspend.
	Suspended func() bool
	// Handled and Observed are status.lastHandledReconcileAt and
	// status.observedGeneration.
	Handled  *string
	Observed *int64
	// Fetch is the kind's whole fetch; on failure it has recorded why.
	Fetch func(context.Context) error
	// Finalize, when set, runs before the artifacts are removed on
	// deletion (a GitRepository's mirrors).
	Finalize func(context.Context) error
}

// Reconcile is every source kind's reconcile around its fetch: the
// finalizer, suspend, `flux reconcile`'s request, the status patch, old
// artifacts collected once the new one is in status, the next interval.
// obj is filled by key; steps reads it.
func (r Recorder) Reconcile(ctx context.Context, c client.Client, key client.ObjectKey, obj Requeued, steps func() Steps) (ctrl.Result, error) {
	finalize := func(ctx context.Context) error {
		if s := steps(); s.Finalize != nil {
			if err := s.Finalize(ctx); err != nil {
				return err
			}
		}
		return r.Finalize(ctx, c, obj)
	}
	if proceed, err := finalizer.Begin(ctx, c, key, obj, Finalizer, finalize); !proceed {
		return ctrl.Result{}, err
	}
	s := steps()
	if s.Suspended() {
		return ctrl.Result{}, nil
	}
	before := obj.DeepCopyObject().(Requeued)
	status.HandleRequest(obj, s.Handled)
	err := s.Fetch(ctx)
	*s.Observed = obj.GetGeneration()
	if perr := status.Patch(ctx, c, before, obj); perr != nil {
		return ctrl.Result{}, perr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	r.CollectGarbage(obj, before.GetArtifact())
	return ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}, nil
}

// Requeued is a source with its interval.
type Requeued interface {
	Source
	GetRequeueAfter() time.Duration
}

// Controller is the controller of a source kind: reconciled when its spec
// changes or `flux reconcile` asks.
func Controller(mgr ctrl.Manager, obj client.Object, concurrent int) *builder.Builder {
	return ctrl.NewControllerManagedBy(mgr).
		For(obj, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrent})
}

// DefaultTimeout bounds a fetch whose spec.timeout is not set, as Flux's.
const DefaultTimeout = 60 * time.Second

// WithTimeout bounds a fetch by spec.timeout, or DefaultTimeout.
func WithTimeout(ctx context.Context, timeout *metav1.Duration) (context.Context, context.CancelFunc) {
	d := DefaultTimeout
	if timeout != nil {
		d = timeout.Duration
	}
	return context.WithTimeout(ctx, d)
}

// Secret reads the Secret that field (spec.secretRef, spec.verify.secretRef)
// of a source names in its namespace; a missing one is named with what to
// put in it.
func Secret(ctx context.Context, c client.Reader, namespace, name, field, holding string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if err := c.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret '%s' named in %s does not exist: create it with %s, or fix the name", key, field, holding)
		}
		return nil, err
	}
	return secret, nil
}
