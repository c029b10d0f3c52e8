package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/internal/status"
)

// report writes the status: state and replicas from the workload,
// the release and config hash, and the conditions. Ready, Progressing
// and Degraded are the component's own; Reconciling and Stalled mirror
// them for kstatus, so a Kustomization's health check waits for a
// component as for a Deployment.
func (r *Reconciler) report(ctx context.Context, obj Object, s *scope, err error) error {
	st := obj.GetStatus()
	st.ObservedGeneration = obj.GetGeneration()
	if s.image.Ref != "" {
		st.Image, st.Version = s.image.Ref, s.image.Version
	}
	if s.hash != "" {
		st.ConfigHash = s.hash
	}
	if !s.workload.found {
		w, rerr := r.readWorkload(ctx, s)
		if rerr != nil {
			return rerr
		}
		s.workload = w
	}
	w := s.workload
	st.Replicas, st.ReadyReplicas = w.replicas, w.ready
	st.State = w.state()
	var refused refusal
	switch {
	case errors.As(err, &refused):
		r.warn(s, "Refused", "%s", refused.Error())
		markFailed(obj, refused.reason, refused.Error(), true)
	case err != nil:
		markFailed(obj, "ReconcileFailed", err.Error(), false)
	default:
		markProgress(obj, w)
		problems := s.problems()
		r.tellNewSkew(s, obj, problems)
		markDegraded(obj, problems)
	}
	return nil
}

// tellNewSkew records a VersionSkew event when the component's Degraded
// condition turns to it, so an Alert hears of it once, not each
// reconcile.
func (r *Reconciler) tellNewSkew(s *scope, obj Object, problems []problem) {
	for _, p := range problems {
		if p.reason != "VersionSkew" {
			continue
		}
		if c := apimeta.FindStatusCondition(obj.GetConditions(), bbv1.ConditionDegraded); c == nil || c.Reason != "VersionSkew" {
			r.warn(s, "VersionSkew", "%s", p.message)
		}
	}
}

func (w workload) rolledOut() bool {
	return w.found && !w.replacing && w.observedGeneration >= w.generation && w.updated == w.desired && w.ready == w.desired && w.replicas == w.desired
}

func (w workload) state() string {
	switch {
	case !w.found:
		return bbv1.StateNotFound
	case w.rolledOut():
		return bbv1.StateReady
	}
	return bbv1.StateNotReady
}

func markFailed(obj Object, reason, msg string, stalled bool) {
	status.Set(obj, bbv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	status.Set(obj, bbv1.ConditionDegraded, metav1.ConditionTrue, reason, msg)
	status.Set(obj, bbv1.ConditionProgressing, metav1.ConditionFalse, reason, msg)
	status.Remove(obj, meta.ReconcilingCondition)
	if stalled {
		status.Set(obj, meta.StalledCondition, metav1.ConditionTrue, reason, msg)
	} else {
		status.Remove(obj, meta.StalledCondition)
	}
}

func markProgress(obj Object, w workload) {
	status.Remove(obj, meta.StalledCondition)
	if w.rolledOut() {
		msg := fmt.Sprintf("%d of %d pods ready", w.ready, w.desired)
		status.Set(obj, bbv1.ConditionReady, metav1.ConditionTrue, "RolledOut", msg)
		status.Set(obj, bbv1.ConditionProgressing, metav1.ConditionFalse, "RolledOut", msg)
		status.Remove(obj, meta.ReconcilingCondition)
		return
	}
	msg := fmt.Sprintf("%d of %d pods ready, %d updated", w.ready, w.desired, w.updated)
	status.Set(obj, bbv1.ConditionReady, metav1.ConditionFalse, "RollingOut", msg)
	status.Set(obj, bbv1.ConditionProgressing, metav1.ConditionTrue, "RollingOut", msg)
	status.Set(obj, meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingReason, msg)
}

// markDegraded: problems that leave the component running.
func markDegraded(obj Object, problems []problem) {
	if len(problems) == 0 {
		status.Set(obj, bbv1.ConditionDegraded, metav1.ConditionFalse, "AsDeclared", "the component runs as its spec says")
		return
	}
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.message)
	}
	status.Set(obj, bbv1.ConditionDegraded, metav1.ConditionTrue, problems[0].reason, strings.Join(msgs, "; "))
}

type problem struct{ reason, message string }

// problems are what makes a running component Degraded: a refused
// claim change, a release other components do not run, a workload that
// cannot make its pods.
func (s *scope) problems() []problem {
	var out []problem
	for _, d := range s.degraded {
		out = append(out, problem{"ClaimChangeRefused", d})
	}
	self := s.owner.Component
	others := s.install.skewExcept(s.kindName, s.obj.GetName(), s.image.Version)
	if len(others) > 0 && !s.spec.AllowVersionSkew {
		out = append(out, problem{"VersionSkew", fmt.Sprintf("this %s runs %s but %s: Buildbarn's components are released together; move them to one release, or set spec.allowVersionSkew",
			self, s.image.Version, strings.Join(others, ", "))})
	}
	if s.workload.failure != "" {
		out = append(out, problem{"WorkloadFailing", s.workload.failure})
	}
	return out
}

// readWorkload reads the component's Deployment or StatefulSet when no
// manager got to it.
func (r *Reconciler) readWorkload(ctx context.Context, s *scope) (workload, error) {
	key := client.ObjectKey{Namespace: s.owner.Namespace, Name: s.owner.Name}
	if s.owner.Component == storage.component {
		ss := &appsv1.StatefulSet{}
		if err := r.Get(ctx, key, ss); err != nil {
			return workload{}, client.IgnoreNotFound(err)
		}
		return statefulSetState(ss), nil
	}
	d := &appsv1.Deployment{}
	if err := r.Get(ctx, key, d); err != nil {
		return workload{}, client.IgnoreNotFound(err)
	}
	return deploymentState(d), nil
}

func (r *Reconciler) event(s *scope, reason, format string, args ...any) {
	r.Events.Eventf(s.obj, nil, corev1.EventTypeNormal, reason, "Reconcile", format, args...)
}

func (r *Reconciler) warn(s *scope, reason, format string, args ...any) {
	r.Events.Eventf(s.obj, nil, corev1.EventTypeWarning, reason, "Reconcile", format, args...)
}
