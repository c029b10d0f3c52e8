package git

import (
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// treeFiles lists the files of a commit that belong in its artifact, with
// the included ones.
func treeFiles(c *object.Commit, specIgnore *string, sparse []string, included []artifact.File) ([]artifact.File, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	return gittree.Files(tree, specIgnore, sparse, included...)
}
