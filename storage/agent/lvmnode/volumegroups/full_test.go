package volumegroups_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/lvmtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvm"
)

// A thin pool filled past the threshold says so on its class (Full, with
// how full), takes no new volume (a capacity of 0), and what was written
// into it reads back whole. An agent started again adopts the group, the
// pool and the volume as they are: nothing wiped, nothing made anew. In
// the guest the pool is dm-thin's and its fill the kernel's own count.
func TestAFullPoolSaysSoKeepsItsDataAndIsAdoptedAfterARestart(t *testing.T) {
	env, m, nodeName := vgNode(t, "full")
	c, ctx := env.Client, context.Background()
	class := fmt.Sprintf("vgf-%d-%d", os.Getpid(), counter.Add(1))
	disk := testenv.LoopDisk(t, 256*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{class}, disk) })
	cluster := &storagev1alpha1.LVMCluster{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: nodeName},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(disk)}},
				ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool", SizePercent: 50}},
		}}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	stop := runVolumeGroups(t, env, m, nodeName, nil)
	ready := testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if st := byName[class]; st.State != storagev1alpha1.StateReady || st.ThinPool == nil || st.ThinPool.Size == nil || st.ThinPool.Full != "" {
			return fmt.Errorf("class %+v, want ready with a pool that is not full", st)
		}
		return nil
	})
	pool := ready[class].ThinPool.Size.Value()

	if err := m.CreateVolume(ctx, class, lvm.VolumeSpec{Name: "filler", Size: uint64(pool), Pool: "pool"}); err != nil {
		t.Fatal(err)
	}
	written := fill(t, m, class, "filler", pool*95/100)
	// The agent reads its pools again every minute, and at once when the
	// cluster changes.
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) {
		l.Annotations = map[string]string{"test.strata.dev/poke": "1"}
	})
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if st := byName[class]; st.ThinPool == nil || !strings.Contains(st.ThinPool.Full, "data") || !strings.Contains(st.ThinPool.Full, "% full") {
			return fmt.Errorf("pool %+v, want it full of data", st.ThinPool)
		}
		return nil
	})
	checkCapacity(t, c, nodeName, class, 0)
	if got := read(t, m, class, "filler", int64(len(written))); !bytes.Equal(got, written) {
		t.Fatal("the volume does not read back what was written into the pool before it was full")
	}

	stop()
	group, err := lvm.FindVolumeGroupOf(ctx, m, class)
	if err != nil {
		t.Fatal(err)
	}
	runVolumeGroups(t, env, m, nodeName, nil)
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) { l.Annotations["test.strata.dev/poke"] = "2" })
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		st := byName[class]
		if st.State != storagev1alpha1.StateReady || st.ThinPool == nil || st.ThinPool.Size.Value() != pool || st.ThinPool.Full == "" {
			return fmt.Errorf("class after the agent started again: %+v, want the same full pool of %d bytes", st, pool)
		}
		return nil
	})
	again, err := lvm.FindVolumeGroupOf(ctx, m, class)
	if err != nil || again.Size != group.Size || fmt.Sprint(again.Devices) != fmt.Sprint(group.Devices) {
		t.Fatalf("group after the agent started again: %+v, %v; want %+v", again, err, group)
	}
	if got := read(t, m, class, "filler", int64(len(written))); !bytes.Equal(got, written) {
		t.Fatal("after the agent started again the volume does not read back what was written")
	}
}

// fill writes size bytes of a pattern no two blocks share into a volume,
// synced, and returns them.
func fill(t *testing.T, m lvm.Manager, vg, name string, size int64) []byte {
	t.Helper()
	data := make([]byte, size)
	for i := 0; i+8 <= len(data); i += 8 {
		copy(data[i:], fmt.Sprintf("%08x", i/8))
	}
	f := lvmtest.Open(t, m, vg, name, os.O_WRONLY)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return data
}

func read(t *testing.T, m lvm.Manager, vg, name string, size int64) []byte {
	t.Helper()
	f := lvmtest.Open(t, m, vg, name, os.O_RDONLY)
	defer f.Close()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data
}
