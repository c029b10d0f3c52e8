package git

import (
	"sync"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// listings keeps the listing of each GitRepository's stored artifact, by
// its object directory, so that the next revision's files are listed from
// what changed.
type listings struct{ m sync.Map }

func (l *listings) last(objectDir string) *gittree.Listing {
	v, _ := l.m.Load(objectDir)
	listing, _ := v.(*gittree.Listing)
	return listing
}

func (l *listings) keep(objectDir string, listing *gittree.Listing) {
	if listing == nil {
		l.m.Delete(objectDir)
		return
	}
	l.m.Store(objectDir, listing)
}

// artifactFiles lists the files of commit that belong in its artifact,
// with extra (the submodules' and included files) over them, and the
// paths changed since the stored artifact's commit: nil when there is
// none, or it is no longer in the mirror. It returns the listing to keep
// once the artifact is stored: nil with extra files, which a listing does
// not hold.
func (r *Reconciler) artifactFiles(m *mirror, obj *sourcev1.GitRepository, objectDir string, commit *object.Commit,
	extra []artifact.File) ([]artifact.File, []string, *gittree.Listing, error) {
	tree, err := commit.Tree()
	if err != nil {
		return nil, nil, nil, err
	}
	var from *object.Tree
	if previous := obj.Status.Artifact; previous != nil {
		from, _ = m.treeAt(previous.Revision)
	}
	if len(extra) > 0 {
		files, err := gittree.Files(tree, obj.Spec.Ignore, obj.Spec.SparseCheckout, extra...)
		if err != nil || from == nil {
			return files, nil, nil, err
		}
		// A diff that cannot be read leaves the changes unknown (nil).
		changed, _ := gittree.Changed(from, tree)
		return files, changed, nil, nil
	}
	listing, changed, err := r.listings.last(objectDir).Next(from, tree, obj.Spec.Ignore, obj.Spec.SparseCheckout)
	if err != nil {
		return nil, nil, nil, err
	}
	return listing.Files(tree), changed, listing, nil
}
