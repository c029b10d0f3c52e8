package git

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-gitops/strata/sources/artifact"
)

// included are the artifacts of the GitRepositories obj includes, from
// the same namespace, in the order of spec.include. Each must have an
// artifact already; until it does, obj keeps its last artifact.
func (r *Reconciler) included(ctx context.Context, obj *sourcev1.GitRepository) ([]*meta.Artifact, error) {
	var out []*meta.Artifact
	for _, inc := range obj.Spec.Include {
		name := inc.GitRepositoryRef.Name
		if name == obj.Name {
			return nil, fmt.Errorf("spec.include names this GitRepository itself ('%s'): remove that entry", name)
		}
		src := &sourcev1.GitRepository{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: name}, src); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("included GitRepository '%s' does not exist in namespace '%s': create it or fix spec.include", name, obj.Namespace)
			}
			return nil, err
		}
		// Its last artifact serves while it fails to fetch a newer one,
		// as it does for its own Kustomizations.
		a := src.Status.Artifact
		if a == nil || !r.Storage.Has(a) {
			return nil, fmt.Errorf("included GitRepository '%s' has no artifact yet; this one is stored again when it has", name)
		}
		out = append(out, a)
	}
	return out, nil
}

// includedFiles lists the files spec.include puts in obj's artifact, at
// their place in it, from the artifacts included returned.
func (r *Reconciler) includedFiles(obj *sourcev1.GitRepository, artifacts []*meta.Artifact) ([]artifact.File, error) {
	var out []artifact.File
	for i, inc := range obj.Spec.Include {
		dir, err := r.Storage.Dir(artifacts[i])
		if err != nil {
			return nil, fmt.Errorf("reading the artifact of included GitRepository '%s': %w", inc.GitRepositoryRef.Name, err)
		}
		from := artifact.PathIn(inc.GetFromPath())
		if info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(from))); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("spec.include fromPath '%s' is not a directory of GitRepository '%s' at revision '%s': "+
				"fix fromPath, or leave it out to include the whole artifact", inc.FromPath, inc.GitRepositoryRef.Name, artifacts[i].Revision)
		}
		files, err := filesUnder(filepath.Join(dir, filepath.FromSlash(from)), artifact.PathIn(inc.GetToPath()))
		if err != nil {
			return nil, fmt.Errorf("reading spec.include fromPath '%s' of GitRepository '%s': %w", inc.FromPath, inc.GitRepositoryRef.Name, err)
		}
		out = append(out, files...)
	}
	return out, nil
}

// filesUnder lists the regular files below dir, named as if dir were to.
func filesUnder(dir, to string) ([]artifact.File, error) {
	var files []artifact.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, artifact.DiskFile(p, path.Join(to, filepath.ToSlash(rel)), info.Mode()))
		return nil
	})
	return files, err
}

// sameIncludes says the stored artifact was made with these includes, of
// these artifacts.
func sameIncludes(obj *sourcev1.GitRepository, artifacts []*meta.Artifact) bool {
	if !slices.Equal(obj.Status.ObservedInclude, obj.Spec.Include) || len(obj.Status.IncludedArtifacts) != len(artifacts) {
		return false
	}
	for i, a := range artifacts {
		if obj.Status.IncludedArtifacts[i] == nil || obj.Status.IncludedArtifacts[i].Digest != a.Digest {
			return false
		}
	}
	return true
}

// includersOf maps a GitRepository to those of its namespace that include
// it, so that they store a new artifact when it does.
func includersOf(c client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &sourcev1.GitRepositoryList{}
		if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, repo := range list.Items {
			for _, inc := range repo.Spec.Include {
				if inc.GitRepositoryRef.Name == obj.GetName() {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&repo)})
					break
				}
			}
		}
		return out
	}
}

// artifactMoved passes the updates that give a GitRepository another
// artifact.
type artifactMoved struct{ predicate.Funcs }

func (artifactMoved) Update(e event.UpdateEvent) bool {
	older, ok1 := e.ObjectOld.(*sourcev1.GitRepository)
	newer, ok2 := e.ObjectNew.(*sourcev1.GitRepository)
	if !ok1 || !ok2 || newer.Status.Artifact == nil {
		return false
	}
	return older.Status.Artifact == nil || older.Status.Artifact.Digest != newer.Status.Artifact.Digest
}
