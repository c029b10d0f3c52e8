package kustomization

import (
	"context"
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

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-gitops/strata/engine/build"
	"github.com/strata-gitops/strata/internal/atomicfile"
)

// appliedRecord is what the last successful apply of a Kustomization left
// in the cluster: the spec generation and the render it applied, and each
// object's resourceVersion right after. While the render is the same and no
// object's resourceVersion has moved, applying again would change nothing,
// so the reconcile skips the per-object dry-runs that Flux sends on every
// interval. Any write to one of the objects, by anyone, moves its
// resourceVersion and brings the dry-run (and the drift correction) back.
type appliedRecord struct {
	Generation int64        `json:"generation"`
	Digest     string       `json:"digest"`
	Objects    []objVersion `json:"objects"`
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

// objVersion is one applied object and its resourceVersion after the apply.
type objVersion struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// renders counts the Kustomizations rendered (kustomize build and
// substitution), in the controller's metrics: a reconcile that finds its
// render recorded makes none.
var renders = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "strata_kustomization_renders_total",
	Help: "Kustomization renders (kustomize build and post-build substitution); reconciles that know their render is unchanged make none.",
})

func init() { metrics.Registry.MustRegister(renders) }

// renderDigest identifies a render: the same objects give the same digest.
func renderDigest(objects []*unstructured.Unstructured) string {
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

// recordStore keeps the appliedRecords in memory and, when it has a
// directory, in one file per Kustomization, so that a restarted controller
// does not dry-run everything again. A lost or unreadable file only costs
// one full reconcile.
type recordStore struct {
	dir string
	mem sync.Map
}

func (s *recordStore) load(key types.NamespacedName) (appliedRecord, bool) {
	if v, ok := s.mem.Load(key); ok {
		return v.(appliedRecord), true
	}
	if s.dir == "" {
		return appliedRecord{}, false
	}
	data, err := os.ReadFile(s.path(key))
	if err != nil {
		return appliedRecord{}, false
	}
	var rec appliedRecord
	if json.Unmarshal(data, &rec) != nil || rec.Digest == "" {
		return appliedRecord{}, false
	}
	s.mem.Store(key, rec)
	return rec, true
}

// loadAll reads every stored record into memory and returns the kinds
// they list.
func (s *recordStore) loadAll() []schema.GroupVersionKind {
	kinds := map[schema.GroupVersionKind]bool{}
	if s.dir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(s.dir, "*", "*.json"))
	for _, f := range files {
		key := types.NamespacedName{Namespace: filepath.Base(filepath.Dir(f)), Name: strings.TrimSuffix(filepath.Base(f), ".json")}
		rec, _ := s.load(key) // an unreadable record lists nothing
		for _, o := range rec.Objects {
			kinds[schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)] = true
		}
	}
	return slices.Collect(maps.Keys(kinds))
}

// save stores rec. The file is a cache: it is replaced atomically but not
// synced, since a record lost in a crash only costs one full reconcile.
func (s *recordStore) save(key types.NamespacedName, rec appliedRecord) error {
	s.mem.Store(key, rec)
	if s.dir == "" {
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

// noteArtifact records that rec's render is also what src renders to, by
// this program, as a render just showed, so that the next reconcile of
// the same artifact need not render.
func (r *Reconciler) noteArtifact(ctx context.Context, obj *kustomizev1.Kustomization, rec appliedRecord, src *source, selfContained bool) {
	if rec.Artifact == src.digest && rec.Renderer == build.Renderer() && rec.SelfContained == selfContained {
		return
	}
	stampRender(&rec, src, selfContained)
	if err := r.records.save(client.ObjectKeyFromObject(obj), rec); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the next reconcile will render again")
	}
}

// stampRender says in rec what its render was made from: the artifact,
// the program, and whether the render read only files under its path
// (build.Rendered.SelfContained).
func stampRender(rec *appliedRecord, src *source, selfContained bool) {
	rec.Artifact, rec.Renderer, rec.SelfContained = src.digest, build.Renderer(), selfContained
}

func (s *recordStore) forget(key types.NamespacedName) {
	s.mem.Delete(key)
	if s.dir != "" {
		_ = os.Remove(s.path(key))
	}
}

func (s *recordStore) path(key types.NamespacedName) string {
	return filepath.Join(s.dir, key.Namespace, key.Name+".json")
}
