package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// Namespace makes a namespace of the test's own: an agent reconciles every
// LVMCluster of its namespace, and an earlier test's cluster may name a
// loop device number that this test's disk now has.
func Namespace(t testing.TB, c client.Client, name string) string {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// LoopbackDir is a directory for a loopback volume manager's files,
// whose loop devices are detached when the test ends.
func LoopbackDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { DetachLoopDevicesUnder(t, dir) })
	return dir
}

// WaitDeviceClasses waits until the node's LVMVolumeGroupNodeStatus (in
// the namespace of the node's name) passes check, and returns its classes
// by name.
func WaitDeviceClasses(t testing.TB, c client.Client, node string, check func(map[string]storagev1alpha1.DeviceClassNodeStatus) error) map[string]storagev1alpha1.DeviceClassNodeStatus {
	t.Helper()
	var byName map[string]storagev1alpha1.DeviceClassNodeStatus
	Eventually(t, 30*time.Second, func() error {
		st := &storagev1alpha1.LVMVolumeGroupNodeStatus{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: node, Name: node}, st); err != nil {
			return err
		}
		byName = map[string]storagev1alpha1.DeviceClassNodeStatus{}
		for _, dc := range st.Status.DeviceClasses {
			byName[dc.VolumeGroup] = dc
		}
		return check(byName)
	})
	return byName
}
