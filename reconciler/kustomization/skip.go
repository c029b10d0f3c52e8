package kustomization

import (
	"context"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/skipapply"
)

// When a reconcile may skip its apply, from the skip-apply layer's
// Record of the last one (reconciler/skipapply): each check reads only what
// it must, cheapest first.

// unchangedRender reports whether the render obj just built is the one it
// last applied, with the same spec, and the cluster still holds exactly
// what that apply left.
func (r *Reconciler) unchangedRender(ctx context.Context, obj *kustomizev1.Kustomization, rec skipapply.Record, digest string) bool {
	return digest != "" && rec.Digest == digest && r.applyUnneeded(obj, rec) && r.memo.InSync(ctx, rec)
}

// untouchedSource reports, without building or extracting the artifact,
// that a new revision cannot change what obj renders: it changed no file
// under obj's path relative to the revision obj last applied, obj's last
// render read nothing outside that path (so neither can this one: what it
// reads is named by the same, unchanged, files), and the cluster still
// holds what that apply left.
func (r *Reconciler) untouchedSource(ctx context.Context, obj *kustomizev1.Kustomization, rec skipapply.Record, src *source) bool {
	return src.revision != obj.Status.LastAppliedRevision && rec.SelfContained && r.applyUnneeded(obj, rec) &&
		r.Storage.Untouched(src.digest, obj.Status.LastAppliedRevision, obj.Spec.Path) &&
		r.memo.InSync(ctx, rec)
}

// sameArtifact reports, without building or even extracting the
// artifact, that obj renders what it last applied: its source's artifact
// is byte for byte the one that render was made from, by this same
// program, with the same spec, and that render read nothing but the
// artifact; and the cluster still holds what the apply left.
func (r *Reconciler) sameArtifact(ctx context.Context, obj *kustomizev1.Kustomization, rec skipapply.Record, src *source) bool {
	return rec.SelfContained && rec.Artifact != "" && rec.Artifact == src.digest && rec.Renderer != "" && rec.Renderer == build.Renderer() &&
		r.applyUnneeded(obj, rec) && r.memo.InSync(ctx, rec)
}

// applyUnneeded holds when obj's last reconcile succeeded with its current
// spec, left no deletion blocked (a blocked one is retried on every
// reconcile, in case the opt-in was added), and rec is the record of that
// apply. Only a Ready Kustomization may skip: a failing one runs its phases
// again whatever changed.
func (r *Reconciler) applyUnneeded(obj *kustomizev1.Kustomization, rec skipapply.Record) bool {
	// The live cache watches this cluster only: a Kustomization applied
	// to another one (spec.kubeConfig) applies every time.
	return obj.Spec.KubeConfig == nil && obj.Status.Inventory != nil && status.IsReady(obj) &&
		apimeta.FindStatusCondition(obj.Status.Conditions, DataProtectedCondition) == nil &&
		obj.Status.ObservedGeneration == obj.Generation && rec.Generation == obj.Generation
}

// noteArtifact records that rec's render is also what src renders to, by
// this program, as a render just showed, so that the next reconcile of
// the same artifact need not render.
func (r *Reconciler) noteArtifact(ctx context.Context, obj *kustomizev1.Kustomization, rec skipapply.Record, src *source, selfContained bool) {
	if rec.Stamped(src.digest, selfContained) {
		return
	}
	rec.Stamp(src.digest, selfContained)
	if err := r.memo.Records.Save(client.ObjectKeyFromObject(obj), rec); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the next reconcile will render again")
	}
}

// renders counts the Kustomizations rendered (kustomize build and
// substitution), in the controller's metrics: a reconcile that finds its
// render recorded makes none.
var renders = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "strata_kustomization_renders_total",
	Help: "Kustomization renders (kustomize build and post-build substitution); reconciles that know their render is unchanged make none.",
})

func init() { metrics.Registry.MustRegister(renders) }
