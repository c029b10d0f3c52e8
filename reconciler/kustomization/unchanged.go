package kustomization

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// appliedRender remembers what the last successful apply of a
// Kustomization rendered. A push changes the revision of every
// Kustomization built from the repository, though most render exactly the
// same objects; those record the new revision without another apply, so
// the Kustomizations the push did change are applied first. Reconciles at
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
	if revision == obj.Status.LastAppliedRevision || digest == "" || obj.Status.Inventory == nil {
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

func (r *Reconciler) rememberRender(obj *kustomizev1.Kustomization, digest string) {
	r.applied.Store(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, appliedRender{obj.Generation, digest})
}
