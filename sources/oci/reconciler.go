package oci

import (
	"context"
	"fmt"
	"net/http"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
	"github.com/strata-gitops/strata/sources/outcome"
)

// Reconciler reconciles OCIRepository objects into artifacts.
type Reconciler struct {
	client.Client
	Storage *artifact.Storage
	Events  events.EventRecorder
	// Transport is the HTTP transport to registries; nil for the default.
	Transport http.RoundTripper
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrent int) error {
	return outcome.Controller(mgr, &sourcev1.OCIRepository{}, concurrent).Complete(r)
}

func (r *Reconciler) outcome() outcome.Recorder {
	return outcome.Recorder{Kind: sourcev1.OCIRepositoryKind, Storage: r.Storage, Events: r.Events}
}

// Reconcile pulls the wanted artifact and stores its layer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.OCIRepository{}
	return r.outcome().Reconcile(ctx, r.Client, req.NamespacedName, obj, func() outcome.Steps {
		return outcome.Steps{Suspended: func() bool { return obj.Spec.Suspend }, Handled: &obj.Status.LastHandledReconcileAt,
			Observed: &obj.Status.ObservedGeneration, Fetch: func(ctx context.Context) error { return r.reconcileArtifact(ctx, obj) }}
	})
}

// reconcileArtifact is the whole pull: on failure the previous artifact
// stays in status and on disk, so consumers keep the last good revision.
func (r *Reconciler) reconcileArtifact(ctx context.Context, obj *sourcev1.OCIRepository) error {
	ctx, cancel := outcome.WithTimeout(ctx, obj.Spec.Timeout)
	defer cancel()

	if err := unsupported(obj); err != nil {
		return r.fail(obj, status.UnsupportedFieldReason, err)
	}
	repo, err := repository(obj)
	if err != nil {
		return r.fail(obj, sourcev1.URLInvalidReason, err)
	}
	reg, err := r.registry(ctx, obj, repo)
	if err != nil {
		return r.fail(obj, sourcev1.AuthenticationFailedReason, err)
	}
	want, err := reg.resolve(ctx, obj.Spec.Reference)
	if err != nil {
		return r.fail(obj, sourcev1.OCIPullFailedReason, err)
	}
	if err := r.verify(ctx, obj, reg, want); err != nil {
		return r.failVerification(obj, err)
	}
	if !r.artifactOutdated(obj, want.revision) {
		r.outcome().Succeed(obj)
		return nil
	}
	files, annotations, err := reg.layerFiles(ctx, want, obj.Spec.LayerSelector, r.Storage.Limits)
	if err != nil {
		return r.fail(obj, sourcev1.OCILayerOperationFailedReason, err)
	}
	if files, err = gittree.Selected(files, obj.Spec.Ignore); err != nil {
		return r.fail(obj, sourcev1.OCILayerOperationFailedReason, err)
	}
	a, err := r.Storage.Store(r.outcome().ObjectDir(obj), want.revision, files)
	if err != nil {
		return r.fail(obj, sourcev1.ArchiveOperationFailedReason, fmt.Errorf("storing artifact for revision '%s': %w", want.revision, err))
	}
	a.Metadata = annotations
	obj.Status.Artifact = a
	obj.Status.URL = a.URL
	obj.Status.ObservedIgnore = obj.Spec.Ignore
	obj.Status.ObservedLayerSelector = obj.Spec.LayerSelector
	r.outcome().Stored(obj, "stored artifact with revision '%s' from '%s'", want.revision, obj.Spec.URL)
	r.outcome().Succeed(obj)
	return nil
}

// artifactOutdated is true when the stored artifact is not the one the
// current spec asks for.
func (r *Reconciler) artifactOutdated(obj *sourcev1.OCIRepository, rev string) bool {
	a := obj.Status.Artifact
	return a == nil || a.Revision != rev || !r.Storage.Has(a) ||
		!ptr.Equal(obj.Status.ObservedIgnore, obj.Spec.Ignore) ||
		!sameSelector(obj.Status.ObservedLayerSelector, obj.Spec.LayerSelector)
}

func sameSelector(a, b *sourcev1.OCILayerSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (r *Reconciler) fail(obj *sourcev1.OCIRepository, reason string, err error) error {
	r.outcome().Fail(obj, reason, err.Error())
	return err
}

// unsupported says why an OCIRepository is refused: a field strata does
// not serve, where going on without it would pull the wrong thing or
// without the credentials the user meant.
func unsupported(obj *sourcev1.OCIRepository) error {
	const flux = "or serve this source with Flux's source-controller"
	s := obj.Spec
	switch {
	case s.Provider != "" && s.Provider != sourcev1.GenericOCIProvider:
		return fmt.Errorf("spec.provider '%s' is not served: give the credentials in spec.secretRef, %s", s.Provider, flux)
	case s.ServiceAccountName != "":
		return fmt.Errorf("spec.serviceAccountName is not served: give the credentials in spec.secretRef, %s", flux)
	case s.CertSecretRef != nil:
		return fmt.Errorf("spec.certSecretRef is not served: use a registry whose certificate the controller's system roots trust, %s", flux)
	case s.ProxySecretRef != nil:
		return fmt.Errorf("spec.proxySecretRef is not served: %s", flux)
	case obj.GetLayerOperation() == sourcev1.OCILayerCopy:
		return fmt.Errorf("spec.layerSelector.operation 'copy' is not served: strata's consumers (Kustomizations) build from an extracted layer; use 'extract', %s", flux)
	}
	return nil
}

// repository is spec.url as a repository name.
func repository(obj *sourcev1.OCIRepository) (name.Repository, error) {
	const prefix = sourcev1.OCIRepositoryPrefix
	url := obj.Spec.URL
	if len(url) <= len(prefix) || url[:len(prefix)] != prefix {
		return name.Repository{}, fmt.Errorf("spec.url '%s' does not start with %s", url, prefix)
	}
	var opts []name.Option
	if obj.Spec.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(url[len(prefix):], opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("spec.url '%s' is not a repository: %w", url, err)
	}
	return repo, nil
}
