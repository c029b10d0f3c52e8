package kustomization

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/kustomize/api/konfig"

	"github.com/strata-gitops/strata/internal/status"
)

// appliedRender remembers what the last successful apply of a
// Kustomization rendered. A push changes the revision of every
// Kustomization built from the repository, though most render exactly the
// same objects; those record the new revision without another apply (and,
// when the push touched no file they read, without a build), so the
// Kustomizations the push did change are applied first. Reconciles at
// an unchanged revision (interval, `flux reconcile`, restart) always apply,
// which is what corrects drift. The record lives in memory: after a restart
// everything is applied once.
type appliedRender struct {
	generation int64
	digest     string
}

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

// unchangedRender reports whether obj, moving to a new revision, renders
// what it last applied.
func (r *Reconciler) unchangedRender(obj *kustomizev1.Kustomization, revision, digest string) bool {
	if revision == obj.Status.LastAppliedRevision || digest == "" || obj.Status.Inventory == nil || !status.IsReady(obj) {
		return false
	}
	v, ok := r.applied.Load(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name})
	if !ok {
		return false
	}
	last := v.(appliedRender)
	return last.generation == obj.Generation && last.digest == digest &&
		obj.Status.ObservedGeneration == obj.Generation
}

// untouchedSource reports, without building, that the new revision cannot
// change what obj renders: the revision changed no file under its path
// relative to the revision it last applied, with the same spec, and its
// build reads nothing outside that path.
func (r *Reconciler) untouchedSource(obj *kustomizev1.Kustomization, src *source) bool {
	// Only a Ready Kustomization may skip: a failing one must run its
	// phases again whatever the push changed.
	if src.revision == obj.Status.LastAppliedRevision || obj.Status.Inventory == nil || !status.IsReady(obj) ||
		!selfContained(obj, src.dir) {
		return false
	}
	v, ok := r.applied.Load(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name})
	if !ok || v.(appliedRender).generation != obj.Generation || obj.Status.ObservedGeneration != obj.Generation {
		return false
	}
	return r.Storage.Untouched(src.digest, obj.Status.LastAppliedRevision, obj.Spec.Path)
}

// selfContained is true when the build reads only files under spec.path:
// no components, no values from the cluster, and a kustomization file (if
// any) with no parent or remote references.
func selfContained(obj *kustomizev1.Kustomization, root string) bool {
	if len(obj.Spec.Components) > 0 || (obj.Spec.PostBuild != nil && len(obj.Spec.PostBuild.SubstituteFrom) > 0) {
		return false
	}
	dir := filepath.Join(root, filepath.Clean("/"+obj.Spec.Path))
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && (bytes.Contains(data, []byte("..")) || bytes.Contains(data, []byte("://"))) {
			return false
		}
	}
	return true
}

func (r *Reconciler) rememberRender(obj *kustomizev1.Kustomization, digest string) {
	r.applied.Store(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, appliedRender{obj.Generation, digest})
}
