package build

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// selfContained is true when a render of ks that read r (ok as readsOf
// says) read only files under ks's spec.path in root, and nothing from the
// cluster. Such a render cannot change while no file under the path
// changes.
func selfContained(ks *kustomizev1.Kustomization, root string, r *reads, ok bool) bool {
	if substitutesFromCluster(ks) {
		return false
	}
	dir := filepath.Join(root, filepath.Clean("/"+ks.Spec.Path))
	for p := range r.seen {
		ok = ok && within(dir, p)
	}
	return ok
}

// substitutesFromCluster says ks's render reads values from ConfigMaps and
// Secrets (postBuild.substituteFrom).
func substitutesFromCluster(ks *kustomizev1.Kustomization) bool {
	return ks.Spec.PostBuild != nil && len(ks.Spec.PostBuild.SubstituteFrom) > 0
}

// PathsRead lists, relative to root, every file and directory rendering
// ks reads: its spec.path, its components, and what the kustomization
// files of those (and of the directories they use) reference. ok is false
// when the render may read anything else: values from the cluster
// (substituteFrom), a remote reference, a reference leaving root, or a
// kustomization file that cannot be read or parsed. The files are parsed,
// not searched: a schema comment's URL is no remote base.
func PathsRead(ks *kustomizev1.Kustomization, root string) (paths []string, ok bool) {
	if substitutesFromCluster(ks) {
		return nil, false
	}
	r, ok := readsOf(ks, root)
	for p := range r.seen {
		rel, _ := filepath.Rel(root, p)
		paths = append(paths, filepath.ToSlash(rel))
	}
	slices.Sort(paths)
	return paths, ok
}

// reads is what rendering a Kustomization reads from its source.
type reads struct {
	root string
	// seen holds every file and directory read.
	seen map[string]bool
	// ownSchema is set when a kustomization file read declares its own
	// OpenAPI schema (`openapi:`).
	ownSchema bool
}

// readsOf follows the kustomization files rendering ks reads: its
// spec.path and its components, recursively. ok is false as PathsRead's,
// values from the cluster aside.
func readsOf(ks *kustomizev1.Kustomization, root string) (r *reads, ok bool) {
	dir := filepath.Join(root, filepath.Clean("/"+ks.Spec.Path))
	r = &reads{root: root, seen: map[string]bool{}}
	ok = r.collect(dir)
	for _, c := range ks.Spec.Components {
		if isRemote(c) {
			return r, false
		}
		p := filepath.Join(dir, c)
		ok = ok && within(root, p) && (r.seen[p] || r.collect(p))
	}
	return r, ok
}

// collect adds dir, and every file and directory its kustomization file
// references, recursing into referenced directories. It is false for a
// reference that is remote or leaves root, or a kustomization file that
// cannot be read or parsed.
func (r *reads) collect(dir string) bool {
	r.seen[dir] = true
	k, found, err := readKustomization(dir)
	if err != nil {
		return false
	}
	if !found {
		return r.collectPlain(dir)
	}
	r.ownSchema = r.ownSchema || len(k.OpenAPI) > 0
	for _, ref := range references(k) {
		if isRemote(ref) {
			return false
		}
		p := filepath.Join(dir, ref)
		if !within(r.root, p) {
			return false
		}
		if r.seen[p] {
			continue
		}
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			if !r.collect(p) {
				return false
			}
			continue
		}
		r.seen[p] = true
	}
	return true
}

// collectPlain follows a directory without a kustomization file as Flux's
// generator builds it: the manifests below it, and as a resource each
// subdirectory that has a kustomization file, which is followed as collect
// follows any, and not descended into further.
func (r *reads) collectPlain(dir string) bool {
	ok := true
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir || !d.IsDir() || !hasKustomizationFile(p) {
			return nil
		}
		if ok = r.collect(p); !ok {
			return filepath.SkipAll
		}
		return filepath.SkipDir
	})
	return ok && err == nil
}

// hasKustomizationFile reports whether dir holds a file kustomize reads as
// its kustomization.
func hasKustomizationFile(dir string) bool {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && !info.IsDir() {
			return true
		}
	}
	return false
}

// within reports whether p is top or below it.
func within(top, p string) bool {
	rel, err := filepath.Rel(top, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// readKustomization reads dir's kustomization file, if it has one.
func readKustomization(dir string) (*types.Kustomization, bool, error) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		k := &types.Kustomization{}
		return k, true, yaml.Unmarshal(data, k)
	}
	return nil, false, nil
}

// references lists every file or directory a kustomization reads.
func references(k *types.Kustomization) []string {
	// The deprecated fields are read too: repositories still use them.
	refs := slices.Concat(k.Resources, k.Components, k.Bases, k.Crds, k.Configurations, k.Generators, k.Transformers, k.Validators) //nolint:staticcheck
	for _, p := range k.PatchesStrategicMerge {                                                                                     //nolint:staticcheck
		if s := string(p); !strings.Contains(s, "\n") { // else an inline patch
			refs = append(refs, s)
		}
	}
	for _, p := range slices.Concat(k.Patches, k.PatchesJson6902) { //nolint:staticcheck
		refs = append(refs, p.Path)
	}
	for _, r := range k.Replacements {
		refs = append(refs, r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		refs = append(refs, generatorFiles(g.KvPairSources)...)
	}
	for _, g := range k.SecretGenerator {
		refs = append(refs, generatorFiles(g.KvPairSources)...)
	}
	if p := k.OpenAPI["path"]; p != "" {
		refs = append(refs, p)
	}
	return refs
}

// generatorFiles are the files a ConfigMap or Secret generator reads;
// a file source may be written key=path.
func generatorFiles(s types.KvPairSources) []string {
	files := append(slices.Clone(s.EnvSources), s.EnvSource)
	for _, f := range s.FileSources {
		if _, p, ok := strings.Cut(f, "="); ok {
			f = p
		}
		files = append(files, f)
	}
	return files
}

// isRemote says whether a reference is a URL or a git address, which
// kustomize fetches.
func isRemote(ref string) bool {
	for _, prefix := range []string{"git@", "github.com/", "gitlab.com/", "bitbucket.org/"} {
		if strings.HasPrefix(ref, prefix) {
			return true
		}
	}
	return strings.Contains(ref, "://")
}
