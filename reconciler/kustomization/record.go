package kustomization

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

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
}

// objVersion is one applied object and its resourceVersion after the apply.
type objVersion struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

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

func (s *recordStore) forget(key types.NamespacedName) {
	s.mem.Delete(key)
	if s.dir != "" {
		_ = os.Remove(s.path(key))
	}
}

func (s *recordStore) path(key types.NamespacedName) string {
	return filepath.Join(s.dir, key.Namespace, key.Name+".json")
}
