package lvmbackend

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// findClass returns the device class of that name, or the default class
// when name is empty, from the LVMClusters of every namespace.
func findClass(ctx context.Context, c client.Reader, name string) (storagev1alpha1.DeviceClass, error) {
	clusters := &storagev1alpha1.LVMClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return storagev1alpha1.DeviceClass{}, status.Errorf(codes.Unavailable, "listing LVMClusters: %v", err)
	}
	var found []storagev1alpha1.DeviceClass
	var where []string
	for _, cluster := range clusters.Items {
		for _, dc := range cluster.Spec.Storage.DeviceClasses {
			if dc.Name == name || (name == "" && dc.Default) {
				found = append(found, dc)
				where = append(where, cluster.Namespace+"/"+cluster.Name+":"+dc.Name)
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1 && name == "":
		return storagev1alpha1.DeviceClass{}, status.Errorf(codes.InvalidArgument,
			"more than one LVMCluster has a default device class (%s): keep one, or name the class in the StorageClass parameter %s",
			strings.Join(where, ", "), storagev1alpha1.DeviceClassParameter)
	case len(found) > 1:
		// Same name in several LVMClusters: one class whose nodes differ.
		return found[0], nil
	case name == "":
		return storagev1alpha1.DeviceClass{}, status.Errorf(codes.InvalidArgument,
			"no device class named: set the StorageClass parameter %s, or mark a class default in an LVMCluster", storagev1alpha1.DeviceClassParameter)
	}
	return storagev1alpha1.DeviceClass{}, status.Errorf(codes.InvalidArgument,
		"device class %q is in no LVMCluster: add it to one, or fix the StorageClass parameter %s", name, storagev1alpha1.DeviceClassParameter)
}

// nodeCapacity reads, per node, the bytes a new volume of the class can
// have there, as the agents last wrote them.
func nodeCapacity(ctx context.Context, c client.Reader, class string) (map[string]int64, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, status.Errorf(codes.Unavailable, "listing Nodes: %v", err)
	}
	out := map[string]int64{}
	for _, n := range nodes.Items {
		if v, ok := n.Annotations[storagev1alpha1.CapacityAnnotationPrefix+class]; ok {
			if bytes, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[n.Name] = bytes
			}
		}
	}
	return out, nil
}

// placeVolume picks the node for a new volume: the first preferred node
// with room; else, of the nodes the topology allows, the one with the
// most room.
func placeVolume(ctx context.Context, c client.Reader, class string, size int64, topology *csi.TopologyRequirement) (string, error) {
	capacity, err := nodeCapacity(ctx, c, class)
	if err != nil {
		return "", err
	}
	for _, t := range topology.GetPreferred() {
		node := t.GetSegments()[backend.TopologyKey]
		if capacity[node] >= size && allowed(node, topology) == nil {
			return node, nil
		}
	}
	best := ""
	for node, bytes := range capacity {
		if bytes >= size && allowed(node, topology) == nil && (best == "" || bytes > capacity[best] || (bytes == capacity[best] && node < best)) {
			best = node
		}
	}
	if best == "" {
		return "", status.Errorf(codes.ResourceExhausted, "no node allowed by the topology has %d bytes for device class %s (free per node: %s)",
			size, class, describe(capacity))
	}
	return best, nil
}

// allowed says whether the topology's requisite nodes include node.
func allowed(node string, topology *csi.TopologyRequirement) error {
	if len(topology.GetRequisite()) == 0 {
		return nil
	}
	var names []string
	for _, t := range topology.GetRequisite() {
		names = append(names, t.GetSegments()[backend.TopologyKey])
	}
	if slices.Contains(names, node) {
		return nil
	}
	return status.Errorf(codes.ResourceExhausted, "the source is on node %s, which the topology does not allow (%s)", node, strings.Join(names, ", "))
}

func describe(capacity map[string]int64) string {
	if len(capacity) == 0 {
		return "no node reports capacity for it; is the strata agent running and the class ready?"
	}
	var parts []string
	for node, bytes := range capacity {
		parts = append(parts, fmt.Sprintf("%s=%d", node, bytes))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
