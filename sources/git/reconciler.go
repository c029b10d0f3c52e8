package git

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/outcome"
)

// Finalizer is Flux's finalizer, so objects move between Flux and strata.
const Finalizer = outcome.Finalizer

// Reconciler reconciles GitRepository objects into artifacts.
type Reconciler struct {
	client.Client
	Storage *artifact.Storage
	Events  events.EventRecorder
	// MirrorDir holds one bare mirror per GitRepository.
	MirrorDir string
	// AllowInsecureHTTPAuth lets credentials go to plain http:// URLs.
	AllowInsecureHTTPAuth bool

	listings listings
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrent int) error {
	return outcome.Controller(mgr, &sourcev1.GitRepository{}, concurrent).
		Watches(&sourcev1.GitRepository{}, handler.EnqueueRequestsFromMapFunc(includersOf(mgr.GetClient())), builder.WithPredicates(artifactMoved{})).
		Complete(r)
}

// Reconcile fetches the wanted ref and stores its artifact.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.GitRepository{}
	return r.outcome().Reconcile(ctx, r.Client, req.NamespacedName, obj, func() outcome.Steps {
		return outcome.Steps{Suspended: func() bool { return obj.Spec.Suspend }, Handled: &obj.Status.LastHandledReconcileAt,
			Observed: &obj.Status.ObservedGeneration, Fetch: func(ctx context.Context) error { return r.reconcileArtifact(ctx, obj) },
			Finalize: func(context.Context) error { return r.removeMirrors(obj) }}
	})
}

// reconcileArtifact is the whole fetch: on failure the previous artifact
// stays in status and on disk, so consumers keep the last good revision.
func (r *Reconciler) reconcileArtifact(ctx context.Context, obj *sourcev1.GitRepository) error {
	ctx, cancel := outcome.WithTimeout(ctx, obj.Spec.Timeout)
	defer cancel()

	if err := unsupported(obj); err != nil {
		r.fail(obj, status.UnsupportedFieldReason, err)
		return err
	}
	objectDir := artifact.ObjectDir(sourcev1.GitRepositoryKind, obj.Namespace, obj.Name)
	m, auth, err := r.connect(ctx, obj, objectDir)
	if err != nil {
		r.fail(obj, sourcev1.AuthenticationFailedReason, err)
		return err
	}
	defer m.close()
	want := newWantedRef(obj.Spec.Reference)
	if err := m.fetch(ctx, want, auth); err != nil {
		reason := sourcev1.GitOperationFailedReason
		if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) {
			reason = sourcev1.AuthenticationFailedReason
		}
		err = fmt.Errorf("failed to fetch %s from '%s': %w", want, Redact(obj.Spec.URL), err)
		r.fail(obj, reason, err)
		return err
	}
	commit, rev, err := m.resolve(want)
	if err != nil {
		r.fail(obj, sourcev1.GitOperationFailedReason, err)
		return err
	}
	if err := r.verifySignatures(ctx, obj, m, commit, rev); err != nil {
		r.failVerification(obj, err)
		return err
	}

	included, err := r.included(ctx, obj)
	if err != nil {
		r.failInclude(obj, err)
		return err
	}
	status.Remove(obj, sourcev1.IncludeUnavailableCondition)
	if !r.artifactOutdated(obj, rev) && sameIncludes(obj, included) {
		r.succeed(obj)
		return nil
	}
	// The submodules' files are read from their mirrors when the artifact
	// is stored: the mirrors stay open until then.
	subFiles, closeSubmodules, err := r.submoduleFiles(ctx, obj, commit, auth, objectDir)
	defer closeSubmodules()
	if err != nil {
		r.fail(obj, sourcev1.GitOperationFailedReason, err)
		return err
	}
	incFiles, err := r.includedFiles(obj, included)
	if err != nil {
		r.failInclude(obj, err)
		return err
	}
	// Included files go over the submodules', as Flux copies them into the
	// checkout last.
	files, changed, listing, err := r.artifactFiles(m, obj, objectDir, commit, append(subFiles, incFiles...))
	if err == nil {
		var a *meta.Artifact
		if a, err = r.Storage.Store(objectDir, rev, files); err == nil {
			r.listings.keep(objectDir, listing)
			// Changes of an included repository are not in this one's
			// history: record this one's only while the included
			// artifacts are those of the previous artifact.
			if previous := obj.Status.Artifact; previous != nil && changed != nil && sameIncludes(obj, included) {
				r.Storage.RecordChanges(a.Digest, previous.Revision, changed)
			}
			obj.Status.Artifact = a
			obj.Status.ObservedIgnore = obj.Spec.Ignore
			obj.Status.ObservedSparseCheckout = obj.Spec.SparseCheckout
			obj.Status.ObservedInclude = obj.Spec.Include
			obj.Status.ObservedRecurseSubmodules = obj.Spec.RecurseSubmodules
			obj.Status.IncludedArtifacts = included
			r.outcome().Stored(obj, "stored artifact for commit '%s'", firstLine(commit.Message))
		}
	}
	if err != nil {
		err = fmt.Errorf("storing artifact for revision '%s': %w", rev, err)
		r.fail(obj, sourcev1.ArchiveOperationFailedReason, err)
		return err
	}
	r.succeed(obj)
	return nil
}

// submoduleFiles are the files of the commit's submodules, with
// spec.recurseSubmodules; closeMirrors closes their mirrors.
func (r *Reconciler) submoduleFiles(ctx context.Context, obj *sourcev1.GitRepository, commit *object.Commit, auth transport.AuthMethod,
	objectDir string) (files []artifact.File, closeMirrors func(), err error) {
	if !obj.Spec.RecurseSubmodules {
		return nil, func() {}, nil
	}
	subs := &submodules{dir: filepath.Join(r.MirrorDir, objectDir) + ".submodules", auth: auth}
	files, err = subs.files(ctx, commit, "", obj.Spec.URL, 0)
	return files, subs.close, err
}

// artifactOutdated is true when the stored artifact is not the one the
// current spec asks for.
func (r *Reconciler) artifactOutdated(obj *sourcev1.GitRepository, rev string) bool {
	a := obj.Status.Artifact
	return a == nil || a.Revision != rev || !r.Storage.Has(a) ||
		!ptr.Equal(obj.Status.ObservedIgnore, obj.Spec.Ignore) || obj.Status.ObservedRecurseSubmodules != obj.Spec.RecurseSubmodules ||
		!slices.Equal(obj.Status.ObservedSparseCheckout, obj.Spec.SparseCheckout)
}

// unsupported says why a GitRepository is refused: a field strata does not
// serve, where an artifact made without it would do harm. Other fields it
// does not serve (spec.proxySecretRef) fail the fetch on their own.
func unsupported(obj *sourcev1.GitRepository) error {
	const flux = "or serve this source with Flux's source-controller"
	switch {
	case obj.Spec.Provider != "" && obj.Spec.Provider != sourcev1.GitProviderGeneric:
		return fmt.Errorf("spec.provider '%s' is not served: give the credentials in spec.secretRef, %s", obj.Spec.Provider, flux)
	}
	return nil
}

func (r *Reconciler) connect(ctx context.Context, obj *sourcev1.GitRepository, objectDir string) (*mirror, transport.AuthMethod, error) {
	var secret *corev1.Secret
	if obj.Spec.SecretRef != nil {
		var err error
		if secret, err = outcome.Secret(ctx, r, obj.Namespace, obj.Spec.SecretRef.Name, "spec.secretRef", "the repository's credentials"); err != nil {
			return nil, nil, err
		}
	}
	dir := filepath.Join(r.MirrorDir, objectDir)
	auth, err := authFromSecret(obj.Spec.URL, secret, dir+".ssh", r.AllowInsecureHTTPAuth)
	if err != nil {
		return nil, nil, err
	}
	m, err := openMirror(dir, obj.Spec.URL)
	return m, auth, err
}

// outcome records the fetches' outcomes as every source kind does.
func (r *Reconciler) outcome() outcome.Recorder {
	return outcome.Recorder{Kind: sourcev1.GitRepositoryKind, Storage: r.Storage, Events: r.Events}
}

func (r *Reconciler) succeed(obj *sourcev1.GitRepository) { r.outcome().Succeed(obj) }

// failInclude records an include that cannot be made: IncludeUnavailable
// as well as Ready false, the last artifact kept.
func (r *Reconciler) failInclude(obj *sourcev1.GitRepository, err error) {
	status.Set(obj, sourcev1.IncludeUnavailableCondition, metav1.ConditionTrue, sourcev1.IncludeUnavailableCondition, err.Error())
	r.fail(obj, sourcev1.IncludeUnavailableCondition, err)
}

// fail records err in status and an event, with the URL's credentials
// hidden.
func (r *Reconciler) fail(obj *sourcev1.GitRepository, reason string, err error) {
	r.outcome().Fail(obj, reason, redactIn(err.Error(), obj.Spec.URL))
}

// removeMirrors removes a deleted GitRepository's mirrors; the artifacts
// go after them.
func (r *Reconciler) removeMirrors(obj *sourcev1.GitRepository) error {
	objectDir := r.outcome().ObjectDir(obj)
	mirror := filepath.Join(r.MirrorDir, objectDir)
	if err := removeAll(mirror, mirror+".ssh", mirror+".submodules"); err != nil {
		return err
	}
	r.listings.keep(objectDir, nil)
	return nil
}

func firstLine(s string) string {
	return strings.SplitN(strings.TrimSpace(s), "\n", 2)[0]
}
