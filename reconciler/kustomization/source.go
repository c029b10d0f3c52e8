package kustomization

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/sources/artifact"
)

// source is a fetched artifact ready to build.
type source struct {
	revision       string
	originRevision string
	digest         string
	// unpack extracts the artifact, or finds it extracted, once; its
	// directory is shared and read only.
	unpack func() (string, error)
}

// dir is the extracted artifact. It is extracted on first use, not on
// every reconcile: after a restart the first extraction checks the
// artifact's digest and unpacks it again, and a reconcile that knows
// its render (sameArtifact) reads no file of it.
func (s *source) dir() (string, error) { return s.unpack() }

// sourceObject is an object a Kustomization builds from: its artifact and
// its conditions.
type sourceObject interface {
	client.Object
	GetArtifact() *meta.Artifact
	GetConditions() []metav1.Condition
}

// sourceKinds are the kinds spec.sourceRef may name, as Flux's
// kustomize-controller takes them. strata serves the first three itself;
// an ExternalArtifact, or a source another controller serves, is
// downloaded from its status.artifact.url.
var sourceKinds = map[string]func() sourceObject{
	sourcev1.GitRepositoryKind:    func() sourceObject { return &sourcev1.GitRepository{} },
	sourcev1.OCIRepositoryKind:    func() sourceObject { return &sourcev1.OCIRepository{} },
	sourcev1.BucketKind:           func() sourceObject { return &sourcev1.Bucket{} },
	sourcev1.ExternalArtifactKind: func() sourceObject { return &sourcev1.ExternalArtifact{} },
}

// kindNames lists the kinds for an error message.
func kindNames() string {
	return strings.Join([]string{sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.BucketKind, sourcev1.ExternalArtifactKind}, ", ")
}

// getSource resolves spec.sourceRef to its current artifact on local disk.
func (r *Reconciler) getSource(ctx context.Context, obj *kustomizev1.Kustomization) (*source, error) {
	ref := obj.Spec.SourceRef
	key := sourceKey(obj)
	newObject, ok := sourceKinds[ref.Kind]
	if !ok {
		return nil, fmt.Errorf("source kind '%s' in spec.sourceRef is not supported: strata builds from %s", ref.Kind, kindNames())
	}
	src := newObject()
	if err := r.Client.Get(ctx, key, src); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("source '%s/%s' not found", ref.Kind, key)
		}
		return nil, err
	}
	a := src.GetArtifact()
	if a == nil {
		err := fmt.Errorf("source '%s/%s' is not ready, artifact not found", ref.Kind, key)
		if fetching(src) {
			return nil, &firstFetchError{err}
		}
		return nil, err
	}
	unpack := sync.OnceValues(func() (string, error) {
		dir, err := r.artifactDir(ctx, ref.Kind, src, a)
		if err != nil {
			return "", fmt.Errorf("source '%s/%s' artifact for revision %s is unavailable: %w", ref.Kind, key, a.Revision, err)
		}
		return dir, nil
	})
	origin := ""
	if a.Metadata != nil {
		origin = a.Metadata["org.opencontainers.image.revision"]
	}
	return &source{revision: a.Revision, originRevision: origin, digest: a.Digest, unpack: unpack}, nil
}

// artifactDir is the artifact extracted: from strata's own storage when
// strata stored it for this very source, otherwise downloaded from the
// controller that did. A status is trusted no further: one naming a path
// of strata's storage outside the source's own directory (another
// namespace's repository) is not read from it.
func (r *Reconciler) artifactDir(ctx context.Context, kind string, src sourceObject, a *meta.Artifact) (string, error) {
	own := artifact.ObjectDir(kind, src.GetNamespace(), src.GetName()) + "/"
	if path.Clean(a.Path) == a.Path && strings.HasPrefix(a.Path, own) && strings.HasPrefix(a.URL, r.Storage.BaseURL+"/") && r.Storage.Has(a) {
		return r.Storage.Dir(a)
	}
	if r.Remote == nil {
		return "", fmt.Errorf("it is served at %s by another controller, and this controller downloads no artifacts", a.URL)
	}
	return r.Remote.Dir(ctx, a, artifact.ObjectDir("remote-"+kind, src.GetNamespace(), src.GetName()))
}

// firstFetchError says the source has no artifact because its first fetch
// is still under way.
type firstFetchError struct{ error }

func (e *firstFetchError) Unwrap() error { return e.error }

// fetching says a source has no artifact yet and reports no failure: its
// first fetch is under way. A suspended source is not fetching.
func fetching(src sourceObject) bool {
	return src.GetArtifact() == nil && !suspended(src) &&
		!apimeta.IsStatusConditionFalse(src.GetConditions(), meta.ReadyCondition)
}

func suspended(src sourceObject) bool {
	switch s := src.(type) {
	case *sourcev1.GitRepository:
		return s.Spec.Suspend
	case *sourcev1.OCIRepository:
		return s.Spec.Suspend
	case *sourcev1.Bucket:
		return s.Spec.Suspend
	}
	return false
}
