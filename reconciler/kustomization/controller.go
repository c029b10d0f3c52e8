// Package kustomization reconciles Flux Kustomization objects with Flux's
// semantics: wait for dependencies, fetch the source artifact, build,
// apply with server-side apply, prune, check health, report status. It
// adds a data-loss guard and event-driven dependency ordering.
package kustomization

import (
	"context"
	"errors"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/acl"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/predicates"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/strata-gitops/strata/internal/finalizer"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/decrypt"
	"github.com/strata-gitops/strata/reconciler/guard"
	"github.com/strata-gitops/strata/reconciler/skipapply"
	"github.com/strata-gitops/strata/sources/artifact"
)

const (
	// Finalizer is Flux's, so Kustomizations move between Flux and strata.
	Finalizer = "finalizers.fluxcd.io"
	// DataProtectedCondition lists deletions the guard blocked.
	DataProtectedCondition = "DataProtected"
	// DeletionBlockedReason is the DataProtected and Ready reason.
	DeletionBlockedReason = "DeletionBlocked"
	// DependencyCycleReason marks every member of a dependsOn cycle.
	DependencyCycleReason = "DependencyCycle"

	dependencyRequeue = 30 * time.Second
)

// Reconciler reconciles Kustomizations.
type Reconciler struct {
	// Client reads through the manager's cache.
	Client client.Client
	// Direct talks to the API server without a cache; the apply engine
	// reads arbitrary kinds and must not start an informer for each.
	Direct client.Client
	// Config builds impersonating clients for spec.serviceAccountName.
	Config  *rest.Config
	Storage *artifact.Storage
	// Remote downloads the artifacts of sources another controller
	// serves (Flux's source-controller, ExternalArtifacts); nil refuses
	// them.
	Remote *artifact.Fetcher
	Events events.EventRecorder
	// Live caches the metadata of applied objects
	// (skipapply.NewLiveCache); without it every reconcile dry-runs every
	// object.
	Live client.Reader
	// RecordDir keeps the skip-apply layer's Records across restarts;
	// empty keeps them in memory only.
	RecordDir string
	// DefaultServiceAccount is impersonated by Kustomizations that name
	// none, so that none applies as the controller itself.
	DefaultServiceAccount string
	// NoCrossNamespaceRefs refuses sources and dependencies in another
	// namespace.
	NoCrossNamespaceRefs bool
	// InsecureKubeconfigTLS takes insecure-skip-tls-verify from
	// spec.kubeConfig Secrets (--insecure-kubeconfig-tls).
	InsecureKubeconfigTLS bool

	// memo is the skip-apply layer's memory (reconciler/skipapply).
	memo *skipapply.Memo
	// remote keeps the clients of remote clusters (spec.kubeConfig).
	remote remoteClients
}

// SetupWithManager registers the reconciler and the watches that make
// dependency ordering and source updates event-driven.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.memo = &skipapply.Memo{Records: skipapply.Records{Dir: r.RecordDir}, Live: r.Live}
	if err := indexFields(ctx, mgr); err != nil {
		return err
	}
	kustomizations, err := mgr.GetCache().GetInformer(ctx, &kustomizev1.Kustomization{})
	if err != nil {
		return err
	}
	// Made now, the sources' informers list beside the Kustomizations'
	// while the manager's caches sync. Made when the controller started,
	// they held the first reconcile back by 100-200 ms: client-go checks
	// an informer's sync every 100 ms.
	sources, err := sourceWatches(ctx, mgr, r.Client, r.Storage)
	if err != nil {
		return err
	}
	// Registered before the manager starts, the recorded kinds' informers
	// start with the live cache and list beside the Kustomizations.
	// Registered by a runnable, they began only once the manager's caches
	// had synced, and the first reconciles waited for them.
	r.memo.Warm(ctx)
	b := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		WatchesRawSource(watch(kustomizations, &handler.EnqueueRequestForObject{},
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		WatchesRawSource(watch(kustomizations, dependentsOf(r.Client, r.Storage), readyOrSpecChanged{})).
		WithOptions(opts).
		WithLogConstructor(requestLogger(mgr.GetLogger()))
	for _, w := range sources {
		b = b.WatchesRawSource(w)
	}
	return b.Complete(r)
}

// Reconcile runs the phases for one Kustomization.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcileRequest(ctx, req)
	// controller-runtime requeues with the priority the item was taken at.
	// A periodic or retry requeue is routine work: left at a push's urgent
	// priority it would outrank, forever, the next push's urgent items.
	result.Priority = ptr.To(routinePriority)
	return result, err
}

func (r *Reconciler) reconcileRequest(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &kustomizev1.Kustomization{}
	finalize := func(ctx context.Context) error { return r.finalize(ctx, obj) }
	if proceed, err := finalizer.Begin(ctx, r.Client, req.NamespacedName, obj, Finalizer, finalize); !proceed {
		return ctrl.Result{}, err
	}
	if obj.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	before := obj.DeepCopy()
	status.HandleRequest(obj, &obj.Status.LastHandledReconcileAt)
	result := r.reconcile(ctx, obj, before)
	if waitingQuietly(before, obj) {
		return result, nil
	}
	obj.Status.ObservedGeneration = obj.Generation
	if err := status.Patch(ctx, r.Client, before, obj); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// waitingQuietly says the reconcile ended without a result to write: a
// Kustomization that never had one, waiting for a dependency in progress
// or for its source's first artifact.
// Its status stays empty, which kstatus reads as in progress (no
// observedGeneration); a reconcile request is always answered.
func waitingQuietly(before, obj *kustomizev1.Kustomization) bool {
	return neverHadResult(obj) && obj.Status.LastHandledReconcileAt == before.Status.LastHandledReconcileAt
}

// neverHadResult says a Kustomization has not been Ready or failed yet.
func neverHadResult(obj *kustomizev1.Kustomization) bool {
	return apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition) == nil
}

// reconcile is the sequence of phases. Each failure becomes a Ready=False
// reason; the cluster keeps the last applied state.
func (r *Reconciler) reconcile(ctx context.Context, obj, before *kustomizev1.Kustomization) ctrl.Result {
	if err := r.checkAccess(obj); err != nil {
		return r.failure(obj, acl.AccessDeniedReason, err)
	}
	src, err := r.getSource(ctx, obj)
	if err != nil {
		// A Kustomization created with its source waits quietly for the
		// first fetch, as for a dependency's first apply: when a cluster
		// starts, saying "artifact not found" would be one more status write
		// and event per Kustomization, for a wait of seconds. It is
		// re-queued when the source gets its artifact or fails.
		if errors.As(err, new(*firstFetchError)) && neverHadResult(obj) {
			return ctrl.Result{RequeueAfter: min(dependencyRequeue, obj.GetRetryInterval())}
		}
		return r.failure(obj, meta.ArtifactFailedReason, err)
	}
	if err := r.checkDependencies(ctx, obj, src.revision); err != nil {
		return r.dependencyFailure(obj, err)
	}
	obj.Status.LastAttemptedRevision = src.revision
	key := client.ObjectKeyFromObject(obj)
	rec, _ := r.memo.Records.Load(key)
	// A decrypting Kustomization renders each time: its keys may have
	// changed where its source did not.
	if obj.Spec.Decryption == nil && (r.untouchedSource(ctx, obj, rec, src) || r.sameArtifact(ctx, obj, rec, src)) {
		return r.succeedUnchanged(ctx, obj, before, src)
	}
	dir, err := src.dir()
	if err != nil {
		return r.failure(obj, meta.ArtifactFailedReason, err)
	}
	rendered, reason, err := r.render(ctx, obj, dir)
	if err != nil {
		return r.failure(obj, reason, err)
	}
	objects := rendered.Objects
	digest := skipapply.Digest(objects)
	if r.unchangedRender(ctx, obj, rec, digest) {
		r.noteArtifact(ctx, obj, rec, src, rendered.SelfContained)
		return r.succeedUnchanged(ctx, obj, before, src)
	}
	if src.revision != obj.Status.LastAppliedRevision {
		defer r.announceProgress(ctx, obj, before, src.revision)()
	}
	engine, err := r.engine(ctx, obj)
	if err != nil {
		return r.failure(obj, meta.ReconciliationFailedReason, err)
	}
	changeSet, err := r.apply(ctx, engine, obj, objects)
	if err != nil {
		var blocked *guard.Blocked
		if errors.As(err, &blocked) {
			status.Set(obj, DataProtectedCondition, metav1.ConditionTrue, DeletionBlockedReason, blocked.Error())
			return r.failure(obj, DeletionBlockedReason, blocked)
		}
		return r.failure(obj, meta.ReconciliationFailedReason, err)
	}
	if err := r.prune(ctx, engine, obj, changeSet); err != nil {
		return r.failure(obj, meta.PruneFailedReason, err)
	}
	if err := r.checkHealth(ctx, engine, obj, objects); err != nil {
		return r.failure(obj, meta.HealthCheckFailedReason, err)
	}
	r.remember(ctx, engine, obj, src, digest, rendered)
	return r.succeed(obj, before, src, changeSet)
}

// succeedUnchanged ends a reconcile that had nothing to apply: the
// Kustomization's health checks still decide whether it is Ready.
func (r *Reconciler) succeedUnchanged(ctx context.Context, obj, before *kustomizev1.Kustomization, src *source) ctrl.Result {
	if err := r.checkHealthChecks(ctx, obj); err != nil {
		return r.failure(obj, meta.HealthCheckFailedReason, err)
	}
	return r.succeed(obj, before, src, ssa.NewChangeSet())
}

// progressDelay is how long an apply of a new revision runs before the
// Kustomization says so in its status. Flux says it at once; most applies
// finish sooner, and then only their result is written, one status write
// per revision instead of two.
const progressDelay = time.Second

// announceProgress marks the Kustomization Reconciling in the cluster once
// the apply has taken progressDelay, so that `flux get ks` and kstatus show
// a long apply as in progress. The returned func ends it; before then
// holds what the cluster has, so the final status patch starts from it.
func (r *Reconciler) announceProgress(ctx context.Context, obj, before *kustomizev1.Kustomization, revision string) func() {
	progress, base := obj.DeepCopy(), before.DeepCopy()
	status.MarkReconciling(progress, fmt.Sprintf("Applying revision %s", revision))
	written, finished := false, make(chan struct{})
	timer := time.AfterFunc(progressDelay, func() {
		defer close(finished)
		written = status.Patch(ctx, r.Client, base, progress) == nil
	})
	return func() {
		if !timer.Stop() {
			<-finished
		}
		if written {
			before.Status = *progress.Status.DeepCopy()
		}
	}
}

// remember records what this apply left in the cluster. Without a record
// the next reconcile dry-runs every object, so a failure here costs time,
// never correctness.
func (r *Reconciler) remember(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, src *source, digest string, rendered *build.Rendered) {
	key := client.ObjectKeyFromObject(obj)
	rec, ok := e.skip.Record(obj, digest, rendered.Objects)
	if !ok {
		r.memo.Records.Forget(key)
		return
	}
	rec.Stamp(src.digest, rendered.SelfContained)
	if err := r.memo.Records.Save(key, rec); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the next reconcile will dry-run every object")
	}
}

func (r *Reconciler) succeed(obj, before *kustomizev1.Kustomization, src *source, cs *ssa.ChangeSet) ctrl.Result {
	obj.Status.LastAppliedRevision = src.revision
	obj.Status.LastAppliedOriginRevision = src.originRevision
	status.MarkReady(obj, meta.ReconciliationSucceededReason, "Applied revision: "+src.revision)
	r.announce(obj, before, cs)
	return ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}
}

// render builds the Kustomization from dir, decrypting with the keys of
// its spec.decryption; on failure it gives the condition's reason.
func (r *Reconciler) render(ctx context.Context, obj *kustomizev1.Kustomization, dir string) (*build.Rendered, string, error) {
	dec, err := r.decrypter(ctx, obj)
	if err != nil {
		return nil, DecryptionFailedReason, err
	}
	renders.Inc()
	rendered, err := build.RenderDecrypting(ctx, dir, obj, r.Direct, dec)
	switch {
	case errors.Is(err, decrypt.ErrDecryptionFailed):
		return nil, DecryptionFailedReason, err
	case err != nil:
		return nil, meta.BuildFailedReason, err
	}
	return rendered, "", nil
}

// DecryptionFailedReason is Flux's reason for a Kustomization whose files
// could not be decrypted: a missing or wrong key, or a bad provider.
const DecryptionFailedReason = "DecryptionFailed"

// decrypter reads the keys of spec.decryption (provider sops) from the
// Secret it names in the Kustomization's namespace; nil without
// spec.decryption. strata holds no keys of its own.
func (r *Reconciler) decrypter(ctx context.Context, obj *kustomizev1.Kustomization) (*decrypt.Decrypter, error) {
	d := obj.Spec.Decryption
	if d == nil {
		return nil, nil
	}
	if d.Provider != "sops" {
		return nil, fmt.Errorf("spec.decryption.provider %q: only sops is served", d.Provider)
	}
	if d.SecretRef == nil {
		return nil, fmt.Errorf("spec.decryption.secretRef is required: strata holds no decryption keys of its own")
	}
	secret := &corev1.Secret{}
	if err := r.Direct.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: d.SecretRef.Name}, secret); err != nil {
		return nil, fmt.Errorf("reading the decryption Secret %s/%s: %w", obj.Namespace, d.SecretRef.Name, err)
	}
	return decrypt.FromSecret(obj.Namespace+"/"+d.SecretRef.Name, secret.Data)
}

func (r *Reconciler) failure(obj *kustomizev1.Kustomization, reason string, err error) ctrl.Result {
	if !status.IsFailedWith(obj, reason, err.Error()) {
		r.Events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", err.Error())
	}
	status.MarkFailed(obj, reason, err.Error(), false)
	return ctrl.Result{RequeueAfter: obj.GetRetryInterval()}
}

// announce emits one event per applied change, never for a no-op.
func (r *Reconciler) announce(obj, before *kustomizev1.Kustomization, cs *ssa.ChangeSet) {
	changes := ""
	for _, e := range cs.Entries {
		if e.Action != ssa.UnchangedAction && e.Action != ssa.SkippedAction {
			changes += e.String() + "\n"
		}
	}
	if changes != "" || before.Status.LastAppliedRevision != obj.Status.LastAppliedRevision {
		r.Events.Eventf(obj, nil, corev1.EventTypeNormal, meta.ReconciliationSucceededReason, "Apply",
			"Applied revision: %s\n%s", obj.Status.LastAppliedRevision, changes)
	}
}
