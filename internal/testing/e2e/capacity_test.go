package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// A WaitForFirstConsumer claim too large for one node's free space has
// its pod scheduled to the other node at once: the provisioner publishes
// each node's capacity (CSIStorageCapacity) and the scheduler reads it.
func TestClaimGoesToTheNodeWithRoom(t *testing.T) {
	c, cl := start(t)
	ctx := context.Background()
	full, roomy := c.Nodes[0].Name(), c.Nodes[1].Name()
	ns := namespaceFor(t, cl, "room")

	// Fill full's thin pool but for about 1 GiB, with a volume its pod
	// pins there: a block volume, so that nothing formats its hundreds of
	// thin GiB.
	left := int64(1 << 30)
	filler := newClaim(ns, "filler", "1Gi")
	var free int64
	testenv.Eventually(t, 2*time.Minute, func() error {
		if free = capacity(t, cl, full); free < 4*left {
			return fmt.Errorf("node %s has %d bytes for new volumes, its agent says", full, free)
		}
		return nil
	})
	size := (free - left) &^ (4<<20 - 1) // whole extents
	filler.Spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(size, resource.BinarySI)
	block := corev1.PersistentVolumeBlock
	filler.Spec.VolumeMode = &block
	pinned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: ns}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: full},
		Containers: []corev1.Container{{Name: "hold", Image: stack.pause, ImagePullPolicy: corev1.PullIfNotPresent,
			VolumeDevices: []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/filler"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: filler.Name}}}},
	}}
	create(t, cl, filler, pinned)
	// The tests after this one need full's room back, published.
	t.Cleanup(func() { giveBack(t, cl, full, free-size, pinned, filler) })
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pinned), pinned); err != nil {
			return err
		}
		if pinned.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("the filler pod is %s: %v", pinned.Status.Phase, pinned.Status.Conditions)
		}
		return nil
	})
	testenv.Eventually(t, 2*time.Minute, func() error {
		published, err := publishedCapacity(ctx, cl, full)
		if err != nil {
			return err
		}
		if published > free-size {
			return fmt.Errorf("CSIStorageCapacity of %s says %d bytes, the agent %d", full, published, capacity(t, cl, full))
		}
		return nil
	})

	claim := newClaim(ns, "data", "2Gi")
	pod := appPod(ns, "app", claim.Name)
	create(t, cl, claim, pod)
	waitServing(t, pod)
	if pod.Spec.NodeName != roomy {
		t.Fatalf("the pod of a 2 GiB claim runs on %s, which had %d bytes left; want %s", pod.Spec.NodeName, left, roomy)
	}
	events := &corev1.EventList{}
	if err := cl.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == claim.Name && e.Reason == "ProvisioningFailed" {
			t.Errorf("the claim was first tried where it did not fit: %s", e.Message)
		}
	}
}

// giveBack deletes the filler and waits until node's published capacity
// is above what the filler left.
func giveBack(t *testing.T, cl client.Client, node string, left int64, objs ...client.Object) {
	ctx := context.Background()
	for _, obj := range objs {
		if err := cl.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		published, err := publishedCapacity(ctx, cl, node)
		if err == nil && published <= left {
			err = fmt.Errorf("CSIStorageCapacity of %s still says %d bytes", node, published)
		}
		return err
	})
}

// publishedCapacity is what the CSIStorageCapacity of node and the class
// "fast" says a new volume may have there.
func publishedCapacity(ctx context.Context, cl client.Client, node string) (int64, error) {
	list := &storagev1.CSIStorageCapacityList{}
	if err := cl.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	for _, c := range list.Items {
		if c.StorageClassName != storagev1alpha1.StorageClassName("fast") || c.NodeTopology == nil ||
			c.NodeTopology.MatchLabels[backend.TopologyKey] != node {
			continue
		}
		if c.MaximumVolumeSize != nil {
			return c.MaximumVolumeSize.Value(), nil
		}
		if c.Capacity != nil {
			return c.Capacity.Value(), nil
		}
	}
	return 0, fmt.Errorf("no CSIStorageCapacity of class %s for node %s among %d", storagev1alpha1.StorageClassName("fast"), node, len(list.Items))
}

// Each node's volume group is made of that node's own disk only, though
// all nodes share the host's /dev: lvm2 on one node must not find
// another's physical volumes and extend its group, or make a second
// group of the same name beside it (the nodes' own lvm.conf).
func TestEachNodesGroupHoldsItsOwnDiskOnly(t *testing.T) {
	c, cl := start(t)
	for _, n := range c.Nodes {
		link, _ := n.HostPath(kubenode.DiskPath(1))
		disk, err := filepath.EvalSymlinks(link)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 2*time.Minute, func() error {
			st := &storagev1alpha1.LVMVolumeGroupNodeStatus{}
			if err := cl.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: n.Name()}, st); err != nil {
				return err
			}
			for _, dc := range st.Status.DeviceClasses {
				if dc.VolumeGroup != "fast" {
					continue
				}
				if dc.State != storagev1alpha1.StateReady {
					return fmt.Errorf("device class fast on %s is %s: %s", n.Name(), dc.State, dc.Reason)
				}
				if len(dc.Devices) != 1 || resolved(n, dc.Devices[0]) != disk {
					return fmt.Errorf("volume group fast on %s is made of %v; want its own disk %s only", n.Name(), dc.Devices, disk)
				}
				return nil
			}
			return fmt.Errorf("node %s reports no device class fast: %+v", n.Name(), st.Status)
		})
	}
}

// resolved is the device a path inside node names, links followed.
func resolved(node *kubenode.Node, path string) string {
	onHost, _ := node.HostPath(path)
	if real, err := filepath.EvalSymlinks(onHost); err == nil {
		return real
	}
	return path
}
