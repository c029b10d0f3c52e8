package lvmnode

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// ClusterClasses resolves device classes from the LVMClusters of one
// namespace. As with LVMS, a class's volume group is named after it.
type ClusterClasses struct {
	Client    client.Reader
	Namespace string
}

// Resolve implements ClassResolver.
func (c ClusterClasses) Resolve(ctx context.Context, class string) (Placement, error) {
	list := &storagev1alpha1.LVMClusterList{}
	if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return Placement{}, err
	}
	for _, cluster := range list.Items {
		for _, dc := range cluster.Spec.Storage.DeviceClasses {
			if dc.Name != class {
				continue
			}
			p := Placement{VolumeGroup: dc.Name}
			if dc.ThinPoolConfig != nil {
				p.ThinPool = dc.ThinPoolConfig.Name
			}
			return p, nil
		}
	}
	return Placement{}, fmt.Errorf("device class %q is in no LVMCluster in namespace %s: add it there or fix spec.deviceClass", class, c.Namespace)
}
