package plan

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"reflect"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	gogit "github.com/go-git/go-git/v5"

	"github.com/strata-gitops/strata/reconciler/build"
)

// unchangedInputs returns, for each side, which Kustomizations need no
// render in a changed-only plan: those whose build reads only files of
// the repository (no substituteFrom, no remote reference in a
// kustomization file), none of them changed (its path, its components and
// every directory or file its kustomization files reference, shared
// components outside the path included), and whose files declare no Flux
// Kustomization (those must render to
// find the Kustomizations below them). The head side renders after the
// base side and skips only what the base side skipped with the same spec
// (sameAsBase); a Kustomization one side skips and the other renders is
// then rendered on both (renderMissing).
func unchangedInputs(repo *gogit.Repository, o Options, base, head *snapshot) (baseSkip, headSkip func(*kustomizev1.Kustomization) bool, err error) {
	var changed map[string]bool
	if base.commit != "" && head.commit != "" {
		changed, err = changedFiles(repo, base.commit, head.commit)
	} else {
		// The working tree (WORKTREE) has no tree object to compare:
		// compare the two checkouts' files, which hold what each
		// artifact would.
		changed, err = changedOnDisk(base.top, head.top)
	}
	if err != nil {
		return nil, nil, err
	}
	skip := func(s *snapshot) func(*kustomizev1.Kustomization) bool {
		return func(ks *kustomizev1.Kustomization) bool {
			paths, ok := build.PathsRead(ks, s.root)
			for _, p := range paths {
				ok = ok && !changedUnder(changed, path.Join(o.SourceRoot, p))
			}
			return ok && !declaresKustomizations(filepath.Join(s.root, filepath.Clean("/"+ks.Spec.Path)))
		}
	}
	return skip(base), skip(head), nil
}

// declaresKustomizations looks for Flux's API group in the files under dir.
func declaresKustomizations(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found || d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte(kustomizev1.GroupVersion.Group)) {
			found = true
		}
		return nil
	})
	return found
}

// sameAsBase narrows the head side's skip to Kustomizations the base side
// skipped with an equal spec.
func sameAsBase(base *side, skip func(*kustomizev1.Kustomization) bool) func(*kustomizev1.Kustomization) bool {
	return func(ks *kustomizev1.Kustomization) bool {
		key := keyOfKs(ks)
		b, r := base.ks[key], base.renders[key]
		return b != nil && r != nil && r.skipped && reflect.DeepEqual(b.Spec, ks.Spec) && skip(ks)
	}
}

// changedOnDisk lists the files, relative to the two directories, that
// differ between them or are in one only.
func changedOnDisk(a, b string) (map[string]bool, error) {
	changed := map[string]bool{}
	seen := map[string]bool{}
	err := filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		seen[rel] = true
		if !sameFile(p, filepath.Join(b, rel)) {
			changed[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(b, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(b, p); !seen[rel] {
			changed[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	return changed, err
}

// sameFile says whether two files hold the same bytes, links the same
// target and have the same executable bit.
func sameFile(a, b string) bool {
	ia, errA := os.Lstat(a)
	ib, errB := os.Lstat(b)
	if errA != nil || errB != nil || ia.Mode() != ib.Mode() {
		return false
	}
	if ia.Mode()&os.ModeSymlink != 0 {
		ta, _ := os.Readlink(a)
		tb, _ := os.Readlink(b)
		return ta == tb
	}
	if ia.Size() != ib.Size() {
		return false
	}
	da, errA := os.ReadFile(a)
	db, errB := os.ReadFile(b)
	return errA == nil && errB == nil && bytes.Equal(da, db)
}
