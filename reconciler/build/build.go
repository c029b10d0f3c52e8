// Package build renders a Flux Kustomization from a source directory into
// the objects the engine applies: generate kustomization.yaml (Flux's
// generator), kustomize build, then postBuild substitution. The controller,
// `strata build` and `strata plan` all render through Render.
package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	fluxfs "github.com/fluxcd/pkg/kustomize/filesys"
	"github.com/fluxcd/pkg/ssa/normalize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/resource"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/strata-gitops/strata/reconciler/decrypt"
)

// Error is a render failure, with the Kustomization path it happened in.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("kustomize build of path '%s' failed: %v", e.Path, e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

// Rendered is what a render made, and what it learnt of its inputs.
type Rendered struct {
	Objects []*unstructured.Unstructured
	// SelfContained says the render read nothing but files under the
	// Kustomization's spec.path: no values from the cluster, no remote
	// base, nothing elsewhere in the source. Such a render stays the same
	// while no file under the path changes.
	SelfContained bool
}

// Render builds ks from the source tree at root. root is read only: the
// generated kustomization.yaml lives in memory, so concurrent renders can
// share one extracted artifact. vars is read for postBuild.substituteFrom;
// it may be nil when the Kustomization has none. Rendering only reads
// through it.
func Render(ctx context.Context, root string, ks *kustomizev1.Kustomization, vars client.Client) (*Rendered, error) {
	return RenderDecrypting(ctx, root, ks, vars, nil)
}

// RenderDecrypting is Render with the files SOPS encrypted decrypted as
// kustomize reads them (resources and generators' files alike), in
// memory: spec.decryption. With dec nil an encrypted object is refused.
func RenderDecrypting(ctx context.Context, root string, ks *kustomizev1.Kustomization, vars client.Client, dec *decrypt.Decrypter) (*Rendered, error) {
	path := ks.Spec.Path
	dir, err := securePath(root, path)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	// The kustomization files are followed once, for both what the build
	// needs to know (its schema) and what the caller does (SelfContained).
	r, followed := readsOf(ks, root)
	resMap, err := kustomizeBuild(root, dir, ks, loadsOwnSchema(r, followed), dec)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	objects, err := substitute(ctx, resMap, ks, vars, dec != nil)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	return &Rendered{Objects: objects, SelfContained: selfContained(ks, root, r, followed)}, nil
}

// ErrPathNotFound: a Kustomization's spec.path is not in the source.
var ErrPathNotFound = errors.New("not found in the source revision")

// securePath resolves the spec.path inside root, refusing to leave it.
func securePath(root, path string) (string, error) {
	dir := filepath.Join(root, filepath.Clean("/"+path))
	info, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("path '%s' %w: check spec.path", path, ErrPathNotFound)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("path '%s' is a file, not a directory: spec.path must name a directory", path)
	}
	return dir, nil
}

// kustomizeBuild is Flux's generator and krusty; ownSchema runs it alone.
func kustomizeBuild(root, dir string, ks *kustomizev1.Kustomization, ownSchema bool, dec *decrypt.Decrypter) (resmap.ResMap, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ks)
	if err != nil {
		return nil, err
	}
	gen := fluxkustomize.NewGenerator(root, unstructured.Unstructured{Object: u})
	manifest, kfile, _, err := gen.GenerateManifest(dir)
	if err != nil {
		return nil, err
	}
	disk, err := fluxfs.MakeFsOnDiskSecure(root)
	if err != nil {
		return nil, err
	}
	fs := fluxfs.MakeFsInMemory(disk)
	if err := fs.WriteFile(kfile, manifest); err != nil {
		return nil, err
	}
	if dec == nil {
		return run(fs, dir, ownSchema)
	}
	dfs := &decryptingFS{FileSystem: fs, dec: dec}
	res, err := run(dfs, dir, ownSchema)
	if dfs.err != nil {
		return nil, dfs.err // the decryption's own error, not kustomize's wrapping of it
	}
	return res, err
}

// decryptingFS decrypts each file SOPS encrypted as kustomize reads it;
// the plaintext stays in the build's memory. The first decryption error
// is kept for the caller.
type decryptingFS struct {
	filesys.FileSystem
	dec *decrypt.Decrypter
	mu  sync.Mutex
	err error
}

func (f *decryptingFS) ReadFile(path string) ([]byte, error) {
	data, err := f.FileSystem.ReadFile(path)
	if err != nil {
		return data, err
	}
	out, _, err := f.dec.File(path, data)
	if err != nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
		return nil, err
	}
	return out, nil
}

// run is krusty with Flux's options: no plugins but the built-ins, loading
// from anywhere inside the source root.
func run(fs filesys.FileSystem, dir string, exclusive bool) (res resmap.ResMap, err error) {
	unlock := lockSchema(exclusive)
	defer unlock()
	// A malformed object can panic inside kustomize; report it as a build
	// error instead of taking the controller down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kustomize panicked: %v", r)
		}
	}()
	k := krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	})
	return k.Run(fs, dir)
}

// substitute applies postBuild variables. substituteFrom is read once per
// render instead of once per object as Flux does.
func substitute(ctx context.Context, resMap resmap.ResMap, ks *kustomizev1.Kustomization, vars client.Client, decrypting bool) ([]*unstructured.Unstructured, error) {
	var inline *unstructured.Unstructured
	if ks.Spec.PostBuild != nil {
		merged, err := Variables(ctx, ks, vars)
		if err != nil {
			return nil, err
		}
		inline = &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"postBuild": map[string]any{"substitute": toAny(merged)}},
		}}
		inline.SetName(ks.Name)
		inline.SetNamespace(ks.Namespace)
	}
	objects := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, res := range resMap.Resources() {
		// A render with no keys of a Kustomization that declares
		// decryption (strata plan's) keeps what is encrypted as it is;
		// every other render refuses it.
		if ks.Spec.Decryption == nil || decrypting {
			if err := refuseEncrypted(res); err != nil {
				return nil, err
			}
		}
		if inline != nil {
			out, err := fluxkustomize.SubstituteVariables(ctx, nil, *inline, res, fluxkustomize.SubstituteWithDryRun(true))
			if err != nil {
				return nil, fmt.Errorf("postBuild substitution in %s/%s: %w", res.GetKind(), res.GetName(), err)
			}
			if out == nil { // substitution disabled for this object
				out = res
			}
			res = out
		}
		// Through JSON, so that numbers are int64 and float64 as in every
		// other unstructured object (kyaml gives int, which DeepCopy refuses).
		data, err := res.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objects = append(objects, obj)
	}
	if err := normalize.UnstructuredList(objects); err != nil {
		return nil, err
	}
	return objects, nil
}

// Variables merges substituteFrom (in order) with the inline substitute
// map, which wins, as Flux documents.
func Variables(ctx context.Context, ks *kustomizev1.Kustomization, vars client.Client) (map[string]string, error) {
	merged := map[string]string{}
	if len(ks.Spec.PostBuild.SubstituteFrom) > 0 {
		if vars == nil {
			return nil, fmt.Errorf("postBuild.substituteFrom reads ConfigMaps and Secrets from the cluster, which is not available here: render with the controller, or remove substituteFrom (keeping postBuild.substitute) from the Kustomization you pass in")
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ks)
		if err != nil {
			return nil, err
		}
		from, err := fluxkustomize.LoadVariables(ctx, vars, unstructured.Unstructured{Object: u})
		if err != nil {
			return nil, err
		}
		merged = from
	}
	for k, v := range ks.Spec.PostBuild.Substitute {
		merged[k] = strings.ReplaceAll(v, "\n", "")
	}
	return merged, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// refuseEncrypted stops a render at an object SOPS encrypted that was not
// decrypted (no spec.decryption): applying the cipher text, or failing on
// its sops: field after other objects were applied, would help no one.
// It looks before substitution, which has nothing to do in cipher text.
func refuseEncrypted(res *resource.Resource) error {
	meta := res.Field("sops")
	if meta == nil || meta.Value.Field("mac") == nil {
		return nil
	}
	return fmt.Errorf("%s/%s is encrypted with SOPS: set the Kustomization's spec.decryption (provider: sops, secretRef: a Secret "+
		"with the age key as *.agekey) to decrypt it", res.GetKind(), res.GetName())
}
