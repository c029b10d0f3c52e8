package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/app/agent"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const mib = 1 << 20

var counter atomic.Int32

// The assembled agent, end to end on a loop disk: an LVMCluster becomes a
// volume group with a thin pool, and a LogicalVolume becomes a device.
func TestAgentFromLVMClusterToDevice(t *testing.T) {
	testenv.NeedRoot(t, "volume groups")
	testenv.NeedTools(t, "lvm", "losetup", "lsblk", "wipefs")
	env := testenv.Get(t)
	c, ctx := env.Client, context.Background()
	o := agent.Defaults()
	o.Node = fmt.Sprintf("agent-node-%d", counter.Add(1))
	o.Namespace = testenv.Namespace(t, c, o.Node)
	o.LVM.Backend, o.LVM.LoopbackDir, o.LVM.MinDeviceSize = "loopback", t.TempDir(), 64*mib
	o.MetricsAddr, o.HealthProbeAddr = "0", "0"
	t.Cleanup(func() { testenv.DetachLoopDevicesUnder(t, o.LVM.LoopbackDir) })
	class := fmt.Sprintf("agent-%d-%d", os.Getpid(), counter.Add(1))
	disk := testenv.LoopDisk(t, 256*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{class}, disk) })

	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Node}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: class, Namespace: o.Namespace},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{
			Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(disk)}},
			ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool"}}}}}}); err != nil {
		t.Fatal(err)
	}
	testenv.RunManagerFrom(t, func(ctx context.Context) (testenv.Manager, error) { return agent.New(ctx, env.Config, o) })

	lv := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: class + "-v"},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: "v", NodeName: o.Node, DeviceClass: class, Size: resource.MustParse("32Mi")}}
	if err := c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	got := &storagev1alpha1.LogicalVolume{}
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(lv), got); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, meta.ReadyCondition) {
			return fmt.Errorf("LogicalVolume %s is not Ready: %+v", lv.Name, got.Status)
		}
		return nil
	})
	if info, err := os.Stat(got.Status.Device); err != nil || info.Mode()&os.ModeDevice == 0 {
		t.Fatalf("device %q: %v", got.Status.Device, err)
	}
	testenv.WaitDeviceClasses(t, c, o.Node, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
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
	if o.LVM.Backend != "lvm2" {
		t.Fatalf("the default backend is %q, want lvm2", o.LVM.Backend)
	}
	o.LVM.Backend = "auto"
	if _, err := agent.VolumeManager(o.LVM); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("VolumeManager(auto) = %v, want a refusal naming loopback", err)
	}
}
