package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A snapshot of a claim restores into a new, larger claim that holds
// what the first pod wrote, with its filesystem grown to the new size.
func TestSnapshotRestoresIntoANewClaim(t *testing.T) {
	a := runApp(t, "snap")
	cl, ns, claim, pod, wrote, ctx := a.client, a.ns, a.claim, a.pod, a.wrote, context.Background()
	class := storagev1alpha1.StorageClassName("fast")
	source := claim.Name
	snap := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns}, Spec: snapshotv1.VolumeSnapshotSpec{
		VolumeSnapshotClassName: &class, Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &source}}}
	create(t, cl, snap)
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
			return err
		}
		if snap.Status == nil || snap.Status.ReadyToUse == nil || !*snap.Status.ReadyToUse {
			return fmt.Errorf("snapshot %s is not ready: %+v", snap.Name, snap.Status)
		}
		return nil
	})
	apiGroup := snapshotv1.GroupName
	restored := newClaim(ns, "restored", "2Gi")
	restored.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: snap.Name}
	reader := appPod(ns, "reader", restored.Name)
	// A thin snapshot lives beside its origin; the scheduler, not
	// spec.nodeName, must place the pod, so that the claim is bound.
	reader.Spec.NodeSelector = map[string]string{corev1.LabelHostname: pod.Spec.NodeName}
	create(t, cl, restored, reader)
	if read := waitServing(t, reader); read != wrote {
		t.Fatalf("the restored claim holds %q, the snapshot was taken of %q", read, wrote)
	}
	before, err := fsSize(pod, "/data")
	if err != nil {
		t.Fatal(err)
	}
	after, err := fsSize(reader, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if after < before+(900<<20) {
		t.Fatalf("the 2 GiB claim restored from a 1 GiB one has a filesystem of %d bytes, its origin %d", after, before)
	}
}

// grow asks for more room in claim and waits until it has it.
func grow(t *testing.T, cl client.Client, claim *corev1.PersistentVolumeClaim, size string) {
	t.Helper()
	ctx := context.Background()
	before := claim.DeepCopy()
	want := resource.MustParse(size)
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = want
	if err := cl.Patch(ctx, claim, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if got := claim.Status.Capacity[corev1.ResourceStorage]; got.Cmp(want) < 0 {
			return fmt.Errorf("claim capacity %s, want %s: %v %v", got.String(), want.String(), claim.Status.Conditions, claim.Status.AllocatedResourceStatuses)
		}
		return nil
	})
}

// A claim grown while its pod runs is grown on the node too: the pod's
// filesystem has the new size without a restart.
func TestOnlineExpansionIsSeenInThePod(t *testing.T) {
	a := runApp(t, "grow")
	cl, claim, pod, ctx := a.client, a.claim, a.pod, context.Background()
	if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	grow(t, cl, claim, "2Gi")
	testenv.Eventually(t, time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		size, err := fsSize(pod, "/data")
		if err == nil && size < 1900<<20 {
			err = fmt.Errorf("the pod sees a filesystem of %d bytes after the claim grew to 2Gi", size)
		}
		return err
	})
}

// A deleted claim's volume goes, and its space comes back to the node.
func TestDeletedClaimFreesItsSpace(t *testing.T) {
	c, cl := start(t)
	before := map[string]int64{} // each node's capacity before the claim
	for _, n := range c.Nodes {
		before[n.Name()] = capacity(t, cl, n.Name())
	}
	a := runApp(t, "free")
	claim, pod, ctx := a.claim, a.pod, context.Background()
	if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	volume := claim.Spec.VolumeName
	node := pod.Spec.NodeName
	size := claim.Spec.Resources.Requests.Storage().Value()
	// The agent counts the new volume in its own time after the volume
	// serves: the capacity it holds is read once it has.
	var held int64
	testenv.Eventually(t, time.Minute, func() error {
		if held = capacity(t, cl, node); held > before[node]-size {
			return fmt.Errorf("node %s has %d bytes for new volumes; the agent has not counted the new %d-byte volume yet (before: %d)",
				node, held, size, before[node])
		}
		return nil
	})
	for _, obj := range []client.Object{pod, claim} {
		if err := cl.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := gone(ctx, cl, &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: volume}}); err != nil {
			return err
		}
		return gone(ctx, cl, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume}})
	})
	testenv.Eventually(t, 3*time.Minute, func() error {
		if free := capacity(t, cl, node); free < held+size {
			return fmt.Errorf("node %s has %d bytes for new volumes, not the %d-byte volume more than before the delete (%d)", node, free, size, held)
		}
		return nil
	})
}

// fsSize asks the example app in pod the size of the filesystem at dir,
// as the pod sees it, over the pod network.
func fsSize(pod *corev1.Pod, dir string) (int64, error) {
	body, err := fetch(fmt.Sprintf("http://%s:8080/size%s", pod.Status.PodIP, dir))
	if err != nil {
		return 0, err
	}
	var size int64
	_, err = fmt.Sscan(body, &size)
	return size, err
}

func create(t testing.TB, cl client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := cl.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// capacity is what the node's agent says a new volume of the class can
// have there.
func capacity(t *testing.T, cl client.Client, node string) int64 {
	t.Helper()
	n := &corev1.Node{}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	var bytes int64
	_, _ = fmt.Sscan(n.Annotations[storagev1alpha1.CapacityAnnotationPrefix+"fast"], &bytes)
	return bytes
}
