package kustomization

import (
	"context"
	"fmt"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/cel"
	celgo "github.com/google/cel-go/cel"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// dependencyError says why a Kustomization must wait; a cycle or a bad
// readyExpr will not resolve by waiting and stalls it.
type dependencyError struct {
	msg     string
	reason  string
	stalled bool
	// behind means the dependency is Ready but has not yet applied the
	// revision this Kustomization is about to apply.
	behind bool
	// pending means the dependency has no result yet: it is being
	// reconciled for the first time or for a new generation.
	pending bool
}

func (e *dependencyError) Error() string { return e.msg }

// checkDependencies returns nil when every dependsOn entry is ready. It
// walks only the part of the graph reachable from obj, so its cost does not
// grow with the number of Kustomizations in the cluster.
func (r *Reconciler) checkDependencies(ctx context.Context, obj *kustomizev1.Kustomization, revision string) error {
	if len(obj.Spec.DependsOn) == 0 {
		return nil
	}
	self := graph.Key{Namespace: obj.Namespace, Name: obj.Name}
	g, found, err := r.reachable(ctx, obj)
	if err != nil {
		return err
	}
	if cycle := g.CycleThrough(self); cycle != nil {
		return &dependencyError{msg: "dependency cycle: " + graph.FormatCycle(cycle) + "; remove one of these dependsOn entries",
			reason: DependencyCycleReason, stalled: true}
	}
	for i, key := range graph.DependencyKeys(obj) {
		dep, ok := found[key]
		if !ok {
			return &dependencyError{msg: fmt.Sprintf("dependency '%s' not found: create it or fix spec.dependsOn", key),
				reason: meta.DependencyNotReadyReason}
		}
		if expr := obj.Spec.DependsOn[i].ReadyExpr; expr != "" {
			if err := readyByExpr(ctx, expr, obj, dep, key); err != nil {
				return err
			}
			continue
		}
		if err := readyBuiltIn(obj, dep, key, revision); err != nil {
			return err
		}
	}
	return nil
}

// reachable fetches every Kustomization obj depends on, transitively.
func (r *Reconciler) reachable(ctx context.Context, obj *kustomizev1.Kustomization) (graph.Graph, map[graph.Key]*kustomizev1.Kustomization, error) {
	self := graph.Key{Namespace: obj.Namespace, Name: obj.Name}
	g := graph.Graph{self: graph.DependencyKeys(obj)}
	found := map[graph.Key]*kustomizev1.Kustomization{self: obj}
	queue := append([]graph.Key(nil), g[self]...)
	for len(queue) > 0 {
		key := queue[0]
		queue = queue[1:]
		if _, seen := g[key]; seen {
			continue
		}
		dep := &kustomizev1.Kustomization{}
		if err := r.Client.Get(ctx, key, dep); err != nil {
			if apierrors.IsNotFound(err) {
				g[key] = nil
				continue
			}
			return nil, nil, err
		}
		found[key] = dep
		g[key] = graph.DependencyKeys(dep)
		queue = append(queue, g[key]...)
	}
	return g, found, nil
}

// readyBuiltIn is Flux's check: the dependency is Ready for its current
// generation and, when it is built from the same source, has applied the
// revision this Kustomization is about to apply.
func readyBuiltIn(obj, dep *kustomizev1.Kustomization, key graph.Key, revision string) error {
	if !status.IsReady(dep) || dep.Status.ObservedGeneration != dep.Generation {
		return &dependencyError{msg: fmt.Sprintf("dependency '%s' is not ready", key), reason: meta.DependencyNotReadyReason,
			pending: inProgress(dep)}
	}
	if sourceKey(dep) == sourceKey(obj) && dep.Spec.SourceRef.Kind == obj.Spec.SourceRef.Kind &&
		dep.Status.LastAppliedRevision != revision {
		return &dependencyError{msg: fmt.Sprintf("dependency '%s' is not ready: it has not applied revision %s yet", key, revision),
			reason: meta.DependencyNotReadyReason, behind: true}
	}
	return nil
}

// inProgress says a Kustomization has no result for its generation yet.
func inProgress(ks *kustomizev1.Kustomization) bool {
	c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	return c == nil || c.Status == metav1.ConditionUnknown ||
		(c.Status == metav1.ConditionTrue && ks.Status.ObservedGeneration != ks.Generation)
}

// readyByExpr evaluates dependsOn[].readyExpr with `self` (this
// Kustomization) and `dep` (the dependency), replacing the built-in check.
func readyByExpr(ctx context.Context, expr string, obj, dep *kustomizev1.Kustomization, key graph.Key) error {
	e, err := cel.NewExpression(expr, cel.WithCompile(), cel.WithOutputType(celgo.BoolType), cel.WithStructVariables("self", "dep"))
	if err != nil {
		return &dependencyError{msg: fmt.Sprintf("readyExpr of dependency '%s' is invalid: %v", key, err),
			reason: meta.InvalidCELExpressionReason, stalled: true}
	}
	self, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	other, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		return err
	}
	ok, err := e.EvaluateBoolean(ctx, map[string]any{"self": self, "dep": other})
	if err != nil {
		return &dependencyError{msg: fmt.Sprintf("readyExpr of dependency '%s' failed: %v", key, err), reason: meta.DependencyNotReadyReason}
	}
	if !ok {
		return &dependencyError{msg: fmt.Sprintf("dependency '%s' is not ready according to readyExpr '%s'", key, expr), reason: meta.DependencyNotReadyReason}
	}
	return nil
}

// dependencyFailure records the wait. Dependents are enqueued when their
// dependency changes, so the periodic retry is only a safety net.
func (r *Reconciler) dependencyFailure(obj *kustomizev1.Kustomization, err error) ctrl.Result {
	de, ok := err.(*dependencyError)
	if !ok {
		return r.failure(obj, meta.DependencyNotReadyReason, err)
	}
	// A Ready Kustomization whose dependency is only catching up with a new
	// revision stays Ready at its applied revision: it is re-queued when the
	// dependency applies, and a Ready=False flap on every push helps no one.
	if de.behind && status.IsReady(obj) {
		return ctrl.Result{RequeueAfter: min(dependencyRequeue, obj.GetRetryInterval())}
	}
	// A new Kustomization whose dependency is still in its first apply
	// waits without a result (see waitingQuietly): saying "not ready" now
	// would be one more write per Kustomization when a cluster starts, for
	// a wait that usually ends in seconds. A dependency that fails is said.
	if de.pending && neverHadResult(obj) {
		return ctrl.Result{RequeueAfter: min(dependencyRequeue, obj.GetRetryInterval())}
	}
	status.MarkFailed(obj, de.reason, de.msg, de.stalled)
	if de.stalled {
		return ctrl.Result{RequeueAfter: obj.GetRetryInterval()}
	}
	return ctrl.Result{RequeueAfter: min(dependencyRequeue, obj.GetRetryInterval())}
}
