package kustomization

import (
	"context"
	"fmt"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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

// getSource resolves spec.sourceRef to its current artifact on local disk.
func (r *Reconciler) getSource(ctx context.Context, obj *kustomizev1.Kustomization) (*source, error) {
	ref := obj.Spec.SourceRef
	key := sourceKey(obj)
	if ref.Kind != sourcev1.GitRepositoryKind {
		return nil, fmt.Errorf("source kind '%s' in spec.sourceRef is not supported: strata serves GitRepository sources", ref.Kind)
	}
	repo := &sourcev1.GitRepository{}
	if err := r.Client.Get(ctx, key, repo); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("source '%s/%s' not found", ref.Kind, key)
		}
		return nil, err
	}
	a := repo.Status.Artifact
	if a == nil {
		err := fmt.Errorf("source '%s/%s' is not ready, artifact not found", ref.Kind, key)
		if fetching(repo) {
			return nil, &firstFetchError{err}
		}
		return nil, err
	}
	unpack := sync.OnceValues(func() (string, error) {
		dir, err := r.Storage.Dir(a)
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

// firstFetchError says the source has no artifact because its first fetch
// is still under way.
type firstFetchError struct{ error }

func (e *firstFetchError) Unwrap() error { return e.error }

// fetching says a source has no artifact yet and reports no failure: its
// first fetch is under way. A suspended source is not fetching.
func fetching(repo *sourcev1.GitRepository) bool {
	return repo.Status.Artifact == nil && !repo.Spec.Suspend &&
		!apimeta.IsStatusConditionFalse(repo.Status.Conditions, meta.ReadyCondition)
}
