package apply

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
)

// keepFailoverSwitch keeps a failed-over app on its backup claim. While a
// Failover runs an app on its backup, the Deployment or StatefulSet from
// Git still names the primary claim, on the lost node; it is applied
// with the backup claim instead, so that no reconcile moves the app back
// and strata plan --kubeconfig reports no drift. Failback clears the
// Failover's active side, and Git's claim applies again.
func keepFailoverSwitch(ctx context.Context, c client.Reader, objects []*unstructured.Unstructured) error {
	failovers := map[string][]failoverv1alpha1.Failover{}
	for _, o := range objects {
		kind := o.GetKind()
		if o.GetAPIVersion() != "apps/v1" || (kind != "Deployment" && kind != "StatefulSet") {
			continue
		}
		list, ok := failovers[o.GetNamespace()]
		if !ok {
			l := &failoverv1alpha1.FailoverList{}
			if err := c.List(ctx, l, client.InNamespace(o.GetNamespace())); err != nil && !apimeta.IsNoMatchError(err) {
				return fmt.Errorf("reading the Failovers of namespace %s: %w", o.GetNamespace(), err)
			}
			list = l.Items
			failovers[o.GetNamespace()] = list
		}
		for _, fo := range list {
			if fo.Status.Active == failoverv1alpha1.ActiveBackup && fo.Spec.Workload.Kind == kind && fo.Spec.Workload.Name == o.GetName() {
				if err := switchClaim(o, fo.Spec.Primary.Claim, fo.Spec.Backup.Claim); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// switchClaim points the pod template's volumes at claim to instead of
// from.
func switchClaim(o *unstructured.Unstructured, from, to string) error {
	path := []string{"spec", "template", "spec", "volumes"}
	volumes, found, err := unstructured.NestedSlice(o.Object, path...)
	if err != nil || !found {
		return err
	}
	for _, v := range volumes {
		if claim, ok := v.(map[string]any)["persistentVolumeClaim"].(map[string]any); ok && claim["claimName"] == from {
			claim["claimName"] = to
		}
	}
	return unstructured.SetNestedSlice(o.Object, volumes, path...)
}
