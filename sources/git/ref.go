package git

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// defaultBranch is what Flux checks out when a GitRepository has no ref.
const defaultBranch = "master"

// wantedRef is a GitRepository ref reduced to what must be fetched and how
// the resulting revision is named, following Flux's precedence:
// commit, then name, then semver, then tag, then branch.
type wantedRef struct {
	spec     sourcev1.GitRepositoryRef
	refSpecs []config.RefSpec
}

func newWantedRef(ref *sourcev1.GitRepositoryRef) wantedRef {
	w := wantedRef{}
	if ref != nil {
		w.spec = *ref
	}
	if w.spec == (sourcev1.GitRepositoryRef{}) {
		w.spec.Branch = defaultBranch
	}
	s := w.spec
	switch {
	case s.Commit != "" && s.Branch != "":
		w.refSpecs = []config.RefSpec{branchRefSpec(s.Branch)}
	case s.Commit != "":
		w.refSpecs = []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}
	case s.Name != "":
		w.refSpecs = []config.RefSpec{config.RefSpec("+" + s.Name + ":" + s.Name)}
	case s.SemVer != "":
		w.refSpecs = []config.RefSpec{"+refs/tags/*:refs/tags/*"}
	case s.Tag != "":
		w.refSpecs = []config.RefSpec{config.RefSpec("+refs/tags/" + s.Tag + ":refs/tags/" + s.Tag)}
	default:
		w.refSpecs = []config.RefSpec{branchRefSpec(s.Branch)}
	}
	return w
}

func branchRefSpec(branch string) config.RefSpec {
	return config.RefSpec("+refs/heads/" + branch + ":refs/heads/" + branch)
}

// String names the ref the way a user wrote it, for messages.
func (w wantedRef) String() string {
	s := w.spec
	switch {
	case s.Commit != "":
		return "commit '" + s.Commit + "'"
	case s.Name != "":
		return "ref '" + s.Name + "'"
	case s.SemVer != "":
		return "semver '" + s.SemVer + "'"
	case s.Tag != "":
		return "tag '" + s.Tag + "'"
	default:
		return "branch '" + s.Branch + "'"
	}
}

// revision formats a resolved commit exactly as Flux writes it:
// "<branch|tag|name>@sha1:<hex>", or "sha1:<hex>" for a bare commit.
func revision(named string, hash plumbing.Hash) string {
	if named == "" {
		return "sha1:" + hash.String()
	}
	return named + "@sha1:" + hash.String()
}

// latestSemverTag picks the highest tag satisfying the constraint, as Flux
// does: tags that are not valid semver are skipped.
func latestSemverTag(constraint string, tags []string) (string, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("semver constraint %q is invalid: %w", constraint, err)
	}
	type candidate struct {
		tag string
		v   *semver.Version
	}
	var matches []candidate
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		matches = append(matches, candidate{t, v})
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("no tag matches semver constraint %q (tags: %s)", constraint, strings.Join(tags, ", "))
	}
	sort.Slice(matches, func(i, j int) bool { return matches[i].v.LessThan(matches[j].v) })
	return matches[len(matches)-1].tag, nil
}
