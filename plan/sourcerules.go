package plan

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	gogit "github.com/go-git/go-git/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/graph"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// sourceRules are the GitRepository's own rules for which files of a
// revision its artifact holds, besides Flux's defaults and .sourceignore:
// spec.ignore and spec.sparseCheckout; and where spec.include puts other
// repositories' files, which the plan does not fetch. The zero value is
// none of them.
type sourceRules struct {
	ignore   *string
	sparse   []string
	included []string
	// submodules: spec.recurseSubmodules, whose paths join included.
	submodules bool
}

// none says the rules leave the files as Flux's defaults do.
func (r sourceRules) none() bool { return r.ignore == nil && len(r.sparse) == 0 }

// readsIncluded refuses to render ks when its render reads a directory
// that spec.include or a submodule fills, or one above it: with only this
// repository's files there, the plan would show the included objects as
// deleted.
func (r sourceRules) readsIncluded(ks *kustomizev1.Kustomization, root string) error {
	if len(r.included) == 0 {
		return nil
	}
	paths, _ := build.PathsRead(ks, root)
	paths = append(paths, artifact.PathIn(ks.Spec.Path))
	for _, p := range paths {
		for _, to := range r.included {
			// Below the filled directory, or a directory above it: Flux's
			// generator builds every manifest under a plain directory.
			if to == "" || p == to || strings.HasPrefix(p, to+"/") || strings.HasPrefix(to, p+"/") {
				return fmt.Errorf("its build reads '%s', and the GitRepository puts another repository's files at '%s' (spec.include or a submodule); "+
					"the plan does not fetch those, so it is not rendered", p, to)
			}
		}
	}
	return nil
}

func (r sourceRules) equal(o sourceRules) bool { return reflect.DeepEqual(r, o) }

// checkoutSides checks out the base and head revisions with the files the
// planned GitRepository's artifact of each would hold. The GitRepository
// is looked for in what the root Kustomization renders, where `flux
// bootstrap` keeps it; its spec.ignore and spec.sparseCheckout at that
// revision decide, as they will once the revision is applied. The root's
// render is kept for the side to use, unless the rules change the files it
// was made from. The checkouts read the repository one after the other
// (go-git's storage is not safe for concurrent readers); the two root
// renders run side by side.
func checkoutSides(ctx context.Context, repo *gogit.Repository, o Options, root *kustomizev1.Kustomization) (base, head *snapshot, err error) {
	sides := []*snapshot{nil, nil}
	cleanup := func() {
		for _, s := range sides {
			if s != nil {
				s.remove()
			}
		}
	}
	for i, ref := range []string{o.Base, o.Head} {
		if sides[i], err = checkout(repo, o.RepoDir, ref, o.SourceRoot, sourceRules{}); err != nil {
			cleanup()
			return nil, nil, err
		}
		sides[i].dec, sides[i].sourceDirs = o.Decrypter, o.SourceDirs
	}
	var wg sync.WaitGroup
	for _, s := range sides {
		wg.Go(func() { s.rootRender = renderOne(ctx, s, root, nil) })
	}
	wg.Wait()
	for i, s := range sides {
		rules := rulesIn(s.rootRender.objects, o.Source)
		if rules.submodules {
			paths, err := submodulePaths(repo, o, s.ref)
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			rules.included = append(rules.included, paths...)
		}
		if rules.none() {
			s.rules = rules // what spec.include fills, if anything
			continue
		}
		s.remove()
		if sides[i], err = checkout(repo, o.RepoDir, s.ref, o.SourceRoot, rules); err != nil {
			sides[i] = nil
			cleanup()
			return nil, nil, err
		}
		sides[i].dec, sides[i].sourceDirs = o.Decrypter, o.SourceDirs
	}
	return sides[0], sides[1], nil
}

// rulesIn finds the GitRepository source among objects and returns its
// rules; none when it is not there.
func rulesIn(objects []*unstructured.Unstructured, source graph.Key) sourceRules {
	for _, o := range objects {
		gvk := o.GroupVersionKind()
		if gvk.Group != sourcev1.GroupVersion.Group || gvk.Kind != sourcev1.GitRepositoryKind ||
			o.GetNamespace() != source.Namespace || o.GetName() != source.Name {
			continue
		}
		repo := &sourcev1.GitRepository{}
		if k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, repo) != nil {
			return sourceRules{}
		}
		rules := sourceRules{ignore: repo.Spec.Ignore, sparse: repo.Spec.SparseCheckout, submodules: repo.Spec.RecurseSubmodules}
		for _, inc := range repo.Spec.Include {
			rules.included = append(rules.included, artifact.PathIn(inc.GetToPath()))
		}
		return rules
	}
	return sourceRules{}
}

// submodulePaths lists, sorted, the submodules of ref (of HEAD for the
// working tree), relative to the source root. Sorted, the same submodules
// give the same rules on both sides, and the same message on every run.
func submodulePaths(repo *gogit.Repository, o Options, ref string) ([]string, error) {
	if ref == WorkTree {
		ref = "HEAD"
	}
	tree, _, err := treeOf(repo, o.RepoDir, ref)
	if err != nil {
		return nil, err
	}
	links, err := gittree.Submodules(tree)
	if err != nil {
		return nil, err
	}
	root := artifact.PathIn(o.SourceRoot)
	var paths []string
	for p := range links {
		switch {
		case root == "":
			paths = append(paths, p)
		case strings.HasPrefix(p, root+"/"):
			paths = append(paths, strings.TrimPrefix(p, root+"/"))
		}
	}
	slices.Sort(paths)
	return paths, nil
}
