package kustomization

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/ssa"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/strata-gitops/strata/internal/status"
)

const healthPollInterval = time.Second

// checkHealth waits, up to spec.timeout, for kstatus to report Current for
// every applied object (spec.wait) and for every spec.healthChecks entry.
func (r *Reconciler) checkHealth(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, objects []*unstructured.Unstructured) error {
	return r.waitHealthy(ctx, e, obj, healthSet(obj, objects))
}

// checkHealthChecks checks spec.healthChecks alone, for a reconcile that
// applied nothing: the applied objects (spec.wait) have not changed since
// they were last found healthy, but objects named in healthChecks may be
// anyone's.
func (r *Reconciler) checkHealthChecks(ctx context.Context, obj *kustomizev1.Kustomization) error {
	if len(obj.Spec.HealthChecks) == 0 {
		return nil
	}
	e, err := r.engine(ctx, obj)
	if err != nil {
		return err
	}
	return r.waitHealthy(ctx, e, obj, healthSet(obj, nil))
}

func (r *Reconciler) waitHealthy(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, set object.ObjMetadataSet) error {
	if len(set) == 0 {
		status.Remove(obj, meta.HealthyCondition)
		return nil
	}
	start := time.Now()
	err := e.manager.WaitForSetWithContext(ctx, set, ssa.WaitOptions{
		Interval: healthPollInterval,
		Timeout:  obj.GetTimeout(),
		FailFast: true,
	})
	if err != nil {
		msg := fmt.Sprintf("health check failed after %s: %s", time.Since(start).Round(time.Second), strings.TrimSpace(err.Error()))
		status.Set(obj, meta.HealthyCondition, metav1.ConditionFalse, meta.HealthCheckFailedReason, msg)
		return fmt.Errorf("%s", msg)
	}
	// An unchanged healthy set keeps its message, so a repeated reconcile
	// writes nothing.
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, meta.HealthyCondition); c == nil ||
		c.Status != metav1.ConditionTrue || c.ObservedGeneration != obj.Generation {
		status.Set(obj, meta.HealthyCondition, metav1.ConditionTrue, meta.SucceededReason,
			fmt.Sprintf("Health check passed in %s", time.Since(start).Round(time.Millisecond)))
	}
	return nil
}

func healthSet(obj *kustomizev1.Kustomization, objects []*unstructured.Unstructured) object.ObjMetadataSet {
	var set object.ObjMetadataSet
	if obj.Spec.Wait {
		set = object.UnstructuredSetToObjMetadataSet(objects)
	}
	for _, hc := range obj.Spec.HealthChecks {
		gv, err := schema.ParseGroupVersion(hc.APIVersion)
		if err != nil {
			continue
		}
		ns := hc.Namespace
		if ns == "" {
			ns = obj.Namespace
		}
		set = append(set, object.ObjMetadata{Namespace: ns, Name: hc.Name, GroupKind: schema.GroupKind{Group: gv.Group, Kind: hc.Kind}})
	}
	return set.Unique()
}
