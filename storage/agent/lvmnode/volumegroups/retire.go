package volumegroups

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/lvm"
)

// retain deals with strata's groups on this node whose device class is no
// longer selected for it: each is kept, with its data, and listed with
// why. It is removed only when all of these hold: the LVMCluster that
// made it (its strata.dev/lvmcluster tag) carries
// strata.dev/allow-data-loss: "true", no LogicalVolume object names it,
// and it holds no logical volume but its thin pool. The last is read
// from lvm2 itself: after an etcd restore the objects are gone and the
// data is not.
func (r *Reconciler) retain(ctx context.Context, clusters []storagev1alpha1.LVMCluster,
	state *storagev1alpha1.LVMVolumeGroupNodeStatus) ([]storagev1alpha1.RetainedGroup, error) {
	groups, err := r.LVM.VolumeGroups(ctx)
	if err != nil {
		return nil, err
	}
	var retained []storagev1alpha1.RetainedGroup
	for _, vg := range groups {
		current := slices.ContainsFunc(state.Status.DeviceClasses, func(dc storagev1alpha1.DeviceClassNodeStatus) bool { return dc.VolumeGroup == vg.Name })
		if current || !vg.HasTag(ManagedTag) || !vg.HasTag(r.namespaceTag()) {
			continue // another namespace's agent's, or made before groups carried their namespace
		}
		reason, err := r.whyKeep(ctx, vg, clusters)
		if err != nil {
			return nil, err
		}
		if reason == "" {
			if err := r.removeGroup(ctx, vg, state); err != nil {
				return nil, err
			}
			continue
		}
		retained = append(retained, storagev1alpha1.RetainedGroup{Name: vg.Name, Devices: vg.Devices, Reason: reason})
	}
	return retained, nil
}

// whyKeep says why a group whose class is gone must stay; empty when
// nothing keeps it.
func (r *Reconciler) whyKeep(ctx context.Context, vg lvm.VolumeGroup, clusters []storagev1alpha1.LVMCluster) (string, error) {
	owner := tagValue(vg.Tags, clusterTagPrefix)
	if owner == "" {
		return fmt.Sprintf("its device class is gone from this node; the group and its data are kept (it was made before groups named their LVMCluster, "+
			"so no opt-in removes it: remove it by hand with vgremove %s if it is garbage)", vg.Name), nil
	}
	optIn := slices.ContainsFunc(clusters, func(c storagev1alpha1.LVMCluster) bool {
		return c.Name == owner && c.Annotations[storagev1alpha1.AllowDataLossAnnotation] == "true"
	})
	if !optIn {
		return fmt.Sprintf("its device class is gone from this node; the group and its data are kept (set %s: \"true\" on LVMCluster %s/%s, which made it, to remove them)",
			storagev1alpha1.AllowDataLossAnnotation, r.Namespace, owner), nil
	}
	users, err := r.volumesOf(ctx, vg.Name)
	if err != nil || len(users) > 0 {
		return fmt.Sprintf("LogicalVolumes %s still use it: delete them (their PVCs) first", strings.Join(users, ", ")), err
	}
	lvs, err := r.LVM.LogicalVolumes(ctx, vg.Name)
	if err != nil {
		return "", err
	}
	var held []string
	for _, lv := range lvs {
		if lv.Kind != lvm.ThinPool {
			held = append(held, lv.Name)
		}
	}
	if len(held) > 0 {
		return fmt.Sprintf("it holds logical volumes %s, which may hold data though no LogicalVolume names them; "+
			"remove them by hand with lvremove if they are garbage", strings.Join(held, ", ")), nil
	}
	return "", nil
}

// removeGroup removes a group every check let go, and says so in the log
// and in an event, with what it held.
func (r *Reconciler) removeGroup(ctx context.Context, vg lvm.VolumeGroup, state *storagev1alpha1.LVMVolumeGroupNodeStatus) error {
	owner := tagValue(vg.Tags, clusterTagPrefix)
	ctrl.LoggerFrom(ctx).Info("removing volume group: its device class is gone, its LVMCluster allows data loss, and it holds no volume",
		"volumeGroup", vg.Name, "devices", vg.Devices, "lvmcluster", owner)
	if err := r.LVM.RemoveVolumeGroup(ctx, vg.Name); err != nil {
		return err
	}
	r.event(state, corev1.EventTypeWarning, "VolumeGroupRemoved", "removed volume group %s on %s (devices %s): its device class is gone, it held no volume, and LVMCluster %s sets %s",
		vg.Name, r.Node, strings.Join(vg.Devices, ", "), owner, storagev1alpha1.AllowDataLossAnnotation)
	return nil
}

// clusterTagPrefix starts the tag that names the LVMCluster a group was
// made for: only that cluster's opt-in can remove it.
const clusterTagPrefix = "strata.dev/lvmcluster="

func clusterTag(name string) string { return clusterTagPrefix + name }

// tagValue is the value of the first tag with prefix, or empty.
func tagValue(tags []string, prefix string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok {
			return v
		}
	}
	return ""
}

// namespaceTag marks the groups made for the LVMClusters of this agent's
// namespace: only those can be retained or removed here.
func (r *Reconciler) namespaceTag() string { return "strata.dev/namespace=" + r.Namespace }

// volumesOf names the LogicalVolumes on this node in a class's group.
func (r *Reconciler) volumesOf(ctx context.Context, class string) ([]string, error) {
	objs := &storagev1alpha1.LogicalVolumeList{}
	if err := r.List(ctx, objs); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range objs.Items {
		if o.Spec.NodeName == r.Node && o.Spec.DeviceClass == class {
			names = append(names, o.Name)
		}
	}
	return names, nil
}

// unclaimed lists the volumes in this node's classes' groups that no
// LogicalVolume bound to this node names. They are reported, never
// removed: a volume may hold data whatever the API says.
func (r *Reconciler) unclaimed(ctx context.Context, classes []storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	objs := &storagev1alpha1.LogicalVolumeList{}
	if err := r.List(ctx, objs); err != nil {
		return nil, err
	}
	claimed := map[string]bool{}
	for _, o := range objs.Items {
		if o.Spec.NodeName == r.Node {
			claimed[o.Spec.DeviceClass+"/"+o.Spec.Name] = true
		}
	}
	var out []string
	for _, c := range classes {
		if c.State != storagev1alpha1.StateReady {
			continue
		}
		lvs, err := r.LVM.LogicalVolumes(ctx, c.VolumeGroup)
		if err != nil {
			return nil, err
		}
		for _, lv := range lvs {
			if lv.Kind != lvm.ThinPool && !claimed[c.VolumeGroup+"/"+lv.Name] {
				out = append(out, c.VolumeGroup+"/"+lv.Name)
			}
		}
	}
	return out, nil
}
