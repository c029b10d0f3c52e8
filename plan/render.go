package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/decrypt"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// side is one revision's Kustomizations, found from the start path, and
// what each renders.
type side struct {
	snap    *snapshot
	objects *repoObjects
	// ks holds every Kustomization found, rendered or not.
	ks      map[graph.Key]*kustomizev1.Kustomization
	renders map[graph.Key]*rendered
	// foreign holds Kustomizations built from another source.
	foreign map[graph.Key]string
	// parent is the Kustomization whose render declared each one.
	parent map[graph.Key]graph.Key
	// rootKs is the root Kustomization, whose render the snapshot may hold.
	rootKs *kustomizev1.Kustomization
}

// renderOne renders ks of the snapshot as the engine would apply it:
// with its commonMetadata set; decrypted with --decryption-key-file when it has spec.decryption.
func renderOne(ctx context.Context, snap *snapshot, ks *kustomizev1.Kustomization, vars client.Client) *rendered {
	return renderFrom(ctx, snap, snap.root, ks, vars)
}

// renderFrom renders ks from the files under root.
func renderFrom(ctx context.Context, snap *snapshot, root string, ks *kustomizev1.Kustomization, vars client.Client) *rendered {
	var dec *decrypt.Decrypter
	if ks.Spec.Decryption != nil {
		dec = snap.dec
	}
	out, err := build.RenderDecrypting(ctx, root, ks, vars, dec)
	if err != nil {
		return &rendered{err: err}
	}
	// The engine adds commonMetadata when it applies; a change to it
	// changes every object.
	if cm := ks.Spec.CommonMetadata; cm != nil {
		ssautils.SetCommonMetadata(out.Objects, cm.Labels, cm.Annotations)
	}
	return &rendered{objects: out.Objects}
}

type rendered struct {
	objects []*unstructured.Unstructured
	err     error
	// skipped: changed-only mode found its inputs unchanged; it renders
	// the same on both sides.
	skipped bool
}

// needsCluster says a render failed only because a ConfigMap or Secret
// that postBuild.substituteFrom names is not in the repository: one the
// cluster holds (made at bootstrap, say).
func (r *rendered) needsCluster(ks *kustomizev1.Kustomization) bool {
	return r != nil && r.err != nil && ks != nil && ks.Spec.PostBuild != nil && len(ks.Spec.PostBuild.SubstituteFrom) > 0 &&
		apierrors.IsNotFound(r.err)
}

// renderSide discovers and renders the Kustomizations of one side: first
// the root (the start path, as the bootstrap Kustomization of the source
// would apply it), then every Kustomization its objects declare whose
// source is this repository, level by level. Kustomizations with
// substituteFrom render last, so the ConfigMaps and Secrets the
// repository defines elsewhere are known. skip, when set, says which
// Kustomizations need no render.
func renderSide(ctx context.Context, snap *snapshot, root *kustomizev1.Kustomization, source graph.Key, outside client.Reader,
	skip func(*kustomizev1.Kustomization) bool) *side {
	objects := newRepoObjects()
	objects.outside = outside
	s := &side{snap: snap, objects: objects, ks: map[graph.Key]*kustomizev1.Kustomization{},
		renders: map[graph.Key]*rendered{}, foreign: map[graph.Key]string{}, parent: map[graph.Key]graph.Key{}, rootKs: root}
	level := []*kustomizev1.Kustomization{root}
	s.ks[keyOfKs(root)] = root
	var late []*kustomizev1.Kustomization
	for len(level) > 0 {
		var now []*kustomizev1.Kustomization
		for _, ks := range level {
			if ks.Spec.PostBuild != nil && len(ks.Spec.PostBuild.SubstituteFrom) > 0 {
				late = append(late, ks)
			} else {
				now = append(now, ks)
			}
		}
		level = s.renderAll(ctx, now, source, skip)
	}
	// A Kustomization may read values another with substituteFrom defines.
	// What a changed-only plan skipped may define them: first render the
	// skipped ones it depends on (where Flux users keep such values, so
	// that they exist before it applies), then those whose files name the
	// missing object. One whose object only the cluster holds costs only
	// itself: the rest stay skipped.
	s.renderAll(ctx, late, source, skip)
	for _, widen := range []func([]*kustomizev1.Kustomization) []*kustomizev1.Kustomization{s.skippedDependencies, s.skippedNaming} {
		failed := s.failed(late)
		if len(failed) == 0 {
			break
		}
		if more := widen(failed); len(more) > 0 {
			s.renderAll(ctx, more, source, nil)
			s.renderAll(ctx, failed, source, nil)
		}
	}
	return s
}

// renderAll renders a level in parallel and returns the Kustomizations
// their objects declare that were not seen before.
func (s *side) renderAll(ctx context.Context, level []*kustomizev1.Kustomization, source graph.Key, skip func(*kustomizev1.Kustomization) bool) []*kustomizev1.Kustomization {
	results := make([]*rendered, len(level))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, ks := range level {
		if skip != nil && skip(ks) {
			results[i] = &rendered{skipped: true}
			continue
		}
		if ks == s.rootKs && s.snap.rootRender != nil {
			results[i] = s.snap.rootRender
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if dir, ok := s.snap.sourceDirFor(ks); ok {
				results[i] = renderFrom(ctx, s.snap, dir, ks, s.objects)
				return
			}
			if err := s.snap.rules.readsIncluded(ks, s.snap.root); err != nil {
				results[i] = &rendered{err: err}
				return
			}
			results[i] = renderOne(ctx, s.snap, ks, s.objects)
		}()
	}
	wg.Wait()
	var next []*kustomizev1.Kustomization
	for i, ks := range level {
		r := results[i]
		s.renders[keyOfKs(ks)] = r
		s.objects.add(r.objects)
		for _, o := range r.objects {
			child, ok := asKustomization(o)
			if !ok {
				continue
			}
			key := keyOfKs(child)
			if _, seen := s.ks[key]; seen {
				continue
			}
			s.ks[key] = child
			s.parent[key] = keyOfKs(ks)
			if _, local := s.snap.sourceDirFor(child); !local {
				if src := sourceOf(child); src != source {
					s.foreign[key] = foreignReason(child, src, source)
					continue
				}
			}
			next = append(next, child)
		}
	}
	return next
}

func (s *side) failed(list []*kustomizev1.Kustomization) []*kustomizev1.Kustomization {
	var out []*kustomizev1.Kustomization
	for _, ks := range list {
		if r := s.renders[keyOfKs(ks)]; r != nil && r.err != nil {
			out = append(out, ks)
		}
	}
	return out
}

// skipped lists the Kustomizations a changed-only plan did not render.
func (s *side) skippedNaming(failed []*kustomizev1.Kustomization) []*kustomizev1.Kustomization {
	var names [][]byte
	for _, ks := range failed {
		name, ok := missingObject(s.renders[keyOfKs(ks)].err)
		if !ok {
			return s.allSkipped() // no name to look for: any may define it
		}
		names = append(names, []byte(name))
	}
	var out []*kustomizev1.Kustomization
	for k, r := range s.renders {
		if r.skipped && filesName(s.ks[k], s.snap.root, names) {
			out = append(out, s.ks[k])
		}
	}
	return out
}

// allSkipped lists every skipped Kustomization.
func (s *side) allSkipped() []*kustomizev1.Kustomization {
	var out []*kustomizev1.Kustomization
	for k, r := range s.renders {
		if r.skipped {
			out = append(out, s.ks[k])
		}
	}
	return out
}

// missingObject is the name of the object a render failed to find.
func missingObject(err error) (string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || status.Status().Details.Name == "" {
		return "", false
	}
	return status.Status().Details.Name, true
}

// filesName says whether a file ks's build reads holds one of names.
func filesName(ks *kustomizev1.Kustomization, root string, names [][]byte) bool {
	paths, _ := build.PathsRead(ks, root)
	found := false
	for _, p := range paths {
		_ = filepath.WalkDir(filepath.Join(root, filepath.Clean("/"+p)), func(path string, d os.DirEntry, err error) error {
			if err != nil || found || d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(path)
			for _, n := range names {
				found = found || err == nil && bytes.Contains(data, n)
			}
			return nil
		})
	}
	return found
}

// skippedDependencies lists the skipped Kustomizations that those given
// depend on, directly or not.
func (s *side) skippedDependencies(list []*kustomizev1.Kustomization) []*kustomizev1.Kustomization {
	seen := map[graph.Key]bool{}
	var out []*kustomizev1.Kustomization
	var visit func(ks *kustomizev1.Kustomization)
	visit = func(ks *kustomizev1.Kustomization) {
		for _, d := range graph.DependencyKeys(ks) {
			dep, ok := s.ks[d]
			if seen[d] || !ok {
				continue
			}
			seen[d] = true
			if r := s.renders[d]; r != nil && r.skipped {
				out = append(out, dep)
			}
			visit(dep)
		}
	}
	for _, ks := range list {
		visit(ks)
	}
	return out
}

func foreignReason(ks *kustomizev1.Kustomization, src, planned graph.Key) string {
	if ks.Spec.SourceRef.Kind != sourcev1.GitRepositoryKind {
		return fmt.Sprintf("source %s is not a GitRepository; only the planned repository (%s) is rendered, and other sources from a directory given with --source-dir %s=DIR",
			sourceDirKey(ks), planned, sourceDirKey(ks))
	}
	return fmt.Sprintf("source GitRepository %s is not the planned repository (%s)", src, planned)
}

// sourceDirKey names a Kustomization's source as --source-dir does:
// Kind/namespace/name.
func sourceDirKey(ks *kustomizev1.Kustomization) string {
	ref := ks.Spec.SourceRef
	ns := ref.Namespace
	if ns == "" {
		ns = ks.Namespace
	}
	return ref.Kind + "/" + ns + "/" + ref.Name
}

// sourceDirFor is the --source-dir directory that stands for ks's source.
func (s *snapshot) sourceDirFor(ks *kustomizev1.Kustomization) (string, bool) {
	dir, ok := s.sourceDirs[sourceDirKey(ks)]
	return dir, ok
}

func asKustomization(o *unstructured.Unstructured) (*kustomizev1.Kustomization, bool) {
	if o.GroupVersionKind().Group != kustomizev1.GroupVersion.Group || o.GetKind() != kustomizev1.KustomizationKind {
		return nil, false
	}
	ks := &kustomizev1.Kustomization{}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ks); err != nil {
		return nil, false
	}
	return ks, true
}

// sourceOf is the GitRepository a Kustomization builds from; another kind
// of source gets an empty key.
func sourceOf(ks *kustomizev1.Kustomization) graph.Key {
	ref := ks.Spec.SourceRef
	if ref.Kind != sourcev1.GitRepositoryKind {
		return graph.Key{Namespace: ref.Kind, Name: ref.Name}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = ks.Namespace
	}
	return graph.Key{Namespace: ns, Name: ref.Name}
}

func keyOfKs(ks *kustomizev1.Kustomization) graph.Key {
	return graph.Key{Namespace: ks.Namespace, Name: ks.Name}
}
