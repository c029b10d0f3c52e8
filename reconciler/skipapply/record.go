package skipapply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/reconciler/build"
)

// Record is what the last successful apply of a Kustomization left
// in the cluster: the spec generation and the render it applied, and each
// object's resourceVersion right after. While the render is the same and no
// object's resourceVersion has moved, applying again would change nothing,
// so the reconcile skips the per-object dry-runs that Flux sends on every
// interval. Any write to one of the objects, by anyone, moves its
// resourceVersion and brings the dry-run (and the drift correction) back.
type Record struct {
	Generation int64        `json:"generation"`
	Digest     string       `json:"digest"`
	Objects    []ObjVersion `json:"objects"`
	// Artifact is the digest of the source artifact the render was made
	// from, and Renderer the program that made it (build.Renderer): while
	// both are the same, a render that reads only the artifact is the same
	// render, and is not made again.
	Artifact string `json:"artifact,omitempty"`
	Renderer string `json:"renderer,omitempty"`
	// SelfContained says the render read nothing but files under the
	// Kustomization's path (build.Rendered.SelfContained): no values from
	// the cluster, no remote base, nothing elsewhere in the artifact.
	SelfContained bool `json:"selfContained,omitempty"`
}

// ObjVersion is one applied object and its resourceVersion after the apply.
type ObjVersion struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// Digest identifies a render: the same objects give the same digest.
func Digest(objects []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, o := range objects {
		data, err := json.Marshal(o.Object)
		if err != nil {
			return ""
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Records keeps the Records in memory and, when it has a
// directory, in one file per Kustomization, so that a restarted controller
// does not dry-run everything again. A lost or unreadable file only costs
// one full reconcile.
type Records struct {
	// Dir holds the records' files; empty keeps them in memory only.
	Dir string
	mem sync.Map
}

func (s *Records) Load(key types.NamespacedName) (Record, bool) {
	if v, ok := s.mem.Load(key); ok {
		return v.(Record), true
	}
	if s.Dir == "" {
		return Record{}, false
	}
	data, err := os.ReadFile(s.path(key))
	if err != nil {
		return Record{}, false
	}
	var rec Record
	if json.Unmarshal(data, &rec) != nil || rec.Digest == "" {
		return Record{}, false
	}
	s.mem.Store(key, rec)
	return rec, true
}

// LoadAll reads every stored record into memory and returns the kinds
// they list.
func (s *Records) LoadAll() []schema.GroupVersionKind {
	kinds := map[schema.GroupVersionKind]bool{}
	if s.Dir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(s.Dir, "*", "*.json"))
	for _, f := range files {
		key := types.NamespacedName{Namespace: filepath.Base(filepath.Dir(f)), Name: strings.TrimSuffix(filepath.Base(f), ".json")}
		rec, _ := s.Load(key) // an unreadable record lists nothing
		for _, o := range rec.Objects {
			kinds[schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)] = true
		}
	}
	return slices.Collect(maps.Keys(kinds))
}

// Save stores rec. The file is a cache: it is replaced atomically but not
// synced, since a record lost in a crash only costs one full reconcile.
func (s *Records) Save(key types.NamespacedName, rec Record) error {
	s.mem.Store(key, rec)
	if s.Dir == "" {
		return nil
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteCache(s.path(key), data); err != nil {
		return fmt.Errorf("recording the apply of %s: %w", key, err)
	}
	return nil
}

// Forget drops the record of key.
func (s *Records) Forget(key types.NamespacedName) {
	s.mem.Delete(key)
	if s.Dir != "" {
		_ = os.Remove(s.path(key))
	}
}

func (s *Records) path(key types.NamespacedName) string {
	return filepath.Join(s.Dir, key.Namespace, key.Name+".json")
}

// Stamp says in rec what its render was made from: the artifact, the
// program (build.Renderer), and whether the render read only files under
// its path (build.Rendered.SelfContained).
func (rec *Record) Stamp(artifact string, selfContained bool) {
	rec.Artifact, rec.Renderer, rec.SelfContained = artifact, build.Renderer(), selfContained
}

// Stamped says whether rec already says it was rendered from artifact,
// by this program, self-contained or not.
func (rec *Record) Stamped(artifact string, selfContained bool) bool {
	return rec.Artifact == artifact && rec.Renderer == build.Renderer() && rec.SelfContained == selfContained
}
