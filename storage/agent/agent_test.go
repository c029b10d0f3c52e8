package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent"
)

// The assembled agent, end to end on a loop disk: an LVMCluster becomes a
// volume group with a thin pool, and a LogicalVolume becomes a device.
func TestAgentFromLVMClusterToDevice(t *testing.T) {
	testenv.NeedRoot(t, "volume groups")
	testenv.NeedTools(t, "lvm", "losetup", "lsblk", "wipefs")
	env := testenv.Get(t)
	c, ctx := env.Client, context.Background()
	o := agent.Defaults()
	o.NodeName = fmt.Sprintf("agent-node-%d", counter.Add(1))
	o.Namespace = testenv.Namespace(t, c, o.NodeName)
	o.Backend, o.LoopbackDir, o.MinDeviceSize = "loopback", t.TempDir(), 64*mib
	o.MetricsAddr, o.HealthProbeAddr = "0", "0"
	t.Cleanup(func() { testenv.DetachLoopDevicesUnder(t, o.LoopbackDir) })
	class := fmt.Sprintf("agent-%d-%d", os.Getpid(), counter.Add(1))
	disk := testenv.LoopDisk(t, 256*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{class}, disk) })

	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.NodeName}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: class, Namespace: o.Namespace},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{
			Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(disk)}},
			ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool"}}}}}}); err != nil {
		t.Fatal(err)
	}
	testenv.RunManagerFrom(t, func(ctx context.Context) (testenv.Manager, error) { return agent.NewManager(ctx, env.Config, o) })

	lv := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: class + "-v"},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: "v", NodeName: o.NodeName, DeviceClass: class, Size: resource.MustParse("32Mi")}}
	if err := c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, c: c}
	got := n.wait(lv, "True", meta.SucceededReason)
	if info, err := os.Stat(got.Status.Device); err != nil || info.Mode()&os.ModeDevice == 0 {
		t.Fatalf("device %q: %v", got.Status.Device, err)
	}
	testenv.WaitDeviceClasses(t, c, o.NodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if st := byName[class]; st.State != storagev1alpha1.StateReady || st.ThinPool == nil {
			return fmt.Errorf("class %+v", st)
		}
		return nil
	})
}

// Loop files are never chosen for the user: lvm2 is the default and the
// old "auto" is refused. (An lvm2 agent on a kernel without device-mapper
// fails its classes: see volumegroups' TestNoDeviceMapperFailsTheClasses.)
func TestTheLoopbackManagerIsOnlyUsedByName(t *testing.T) {
	o := agent.Defaults()
	if o.Backend != "lvm2" {
		t.Fatalf("the default backend is %q, want lvm2", o.Backend)
	}
	o.Backend = "auto"
	if _, err := agent.VolumeManager(o); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("VolumeManager(auto) = %v, want a refusal naming loopback", err)
	}
}
