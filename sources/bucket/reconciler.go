// Package bucket serves Flux's Bucket source: the objects of an S3 bucket
// (MinIO or any S3-compatible store, provider generic), read with
// minio-go, stored as an artifact Kustomizations build from. The revision
// is the digest of the listing's keys and ETags, as Flux computes it, so
// an unchanged bucket costs one listing and no download.
package bucket

import (
	"context"
	"fmt"
	"net/http"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/outcome"
)

// Reconciler reconciles Bucket objects into artifacts.
type Reconciler struct {
	client.Client
	Storage *artifact.Storage
	Events  events.EventRecorder
	// Transport is the HTTP transport to the S3 endpoints; nil for the
	// default.
	Transport http.RoundTripper
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrent int) error {
	return outcome.Controller(mgr, &sourcev1.Bucket{}, concurrent).Complete(r)
}

func (r *Reconciler) outcome() outcome.Recorder {
	return outcome.Recorder{Kind: sourcev1.BucketKind, Storage: r.Storage, Events: r.Events}
}

// Reconcile lists the bucket and stores its objects when they changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sourcev1.Bucket{}
	return r.outcome().Reconcile(ctx, r.Client, req.NamespacedName, obj, func() outcome.Steps {
		return outcome.Steps{Suspended: func() bool { return obj.Spec.Suspend }, Handled: &obj.Status.LastHandledReconcileAt,
			Observed: &obj.Status.ObservedGeneration, Fetch: func(ctx context.Context) error { return r.reconcileArtifact(ctx, obj) }}
	})
}

// reconcileArtifact is the whole fetch: on failure the previous artifact
// stays in status and on disk, so consumers keep the last good revision.
func (r *Reconciler) reconcileArtifact(ctx context.Context, obj *sourcev1.Bucket) error {
	ctx, cancel := outcome.WithTimeout(ctx, obj.Spec.Timeout)
	defer cancel()

	if err := unsupported(obj); err != nil {
		return r.fail(obj, status.UnsupportedFieldReason, err)
	}
	s3, err := r.connect(ctx, obj)
	if err != nil {
		return r.fail(obj, sourcev1.AuthenticationFailedReason, err)
	}
	listing, err := s3.list(ctx, obj.Spec.Prefix, obj.Spec.Ignore, r.Storage.Limits)
	if err != nil {
		return r.fail(obj, sourcev1.BucketOperationFailedReason, err)
	}
	rev := listing.revision()
	if !r.artifactOutdated(obj, rev) {
		r.outcome().Succeed(obj)
		return nil
	}
	a, err := r.Storage.Store(r.outcome().ObjectDir(obj), rev, listing.files)
	if err != nil {
		return r.fail(obj, sourcev1.BucketOperationFailedReason, fmt.Errorf("storing artifact for revision '%s': %w", rev, err))
	}
	obj.Status.Artifact = a
	obj.Status.URL = a.URL
	obj.Status.ObservedIgnore = obj.Spec.Ignore
	r.outcome().Stored(obj, "stored artifact with revision '%s' from bucket '%s' (%d objects)", rev, obj.Spec.BucketName, len(listing.files))
	r.outcome().Succeed(obj)
	return nil
}

// artifactOutdated is true when the stored artifact is not the one the
// current spec asks for.
func (r *Reconciler) artifactOutdated(obj *sourcev1.Bucket, rev string) bool {
	a := obj.Status.Artifact
	return a == nil || a.Revision != rev || !r.Storage.Has(a) || !ptr.Equal(obj.Status.ObservedIgnore, obj.Spec.Ignore)
}

func (r *Reconciler) fail(obj *sourcev1.Bucket, reason string, err error) error {
	r.outcome().Fail(obj, reason, err.Error())
	return err
}

// unsupported says why a Bucket is refused: a field strata does not
// serve, where going on without it would read with other credentials
// than the user meant.
func unsupported(obj *sourcev1.Bucket) error {
	const flux = "or serve this source with Flux's source-controller"
	s := obj.Spec
	switch {
	case s.Provider != "" && s.Provider != sourcev1.BucketProviderGeneric:
		return fmt.Errorf("spec.provider '%s' is not served: strata reads S3-compatible buckets (provider generic) with the keys of spec.secretRef, %s", s.Provider, flux)
	case s.STS != nil:
		return fmt.Errorf("spec.sts is not served: give static keys in spec.secretRef, %s", flux)
	case s.ServiceAccountName != "":
		return fmt.Errorf("spec.serviceAccountName is not served: give static keys in spec.secretRef, %s", flux)
	case s.CertSecretRef != nil:
		return fmt.Errorf("spec.certSecretRef is not served: use an endpoint whose certificate the controller's system roots trust, %s", flux)
	case s.ProxySecretRef != nil:
		return fmt.Errorf("spec.proxySecretRef is not served: %s", flux)
	}
	return nil
}
