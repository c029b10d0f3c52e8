package volumegroups_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/lvmtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/disks"
	"github.com/strata-gitops/strata/storage/agent/lvmnode/volumegroups"
	"github.com/strata-gitops/strata/storage/lvm"
)

// An LVMCluster in the API becomes tagged volume groups and a thin pool
// on real loop disks; a disk with a filesystem is refused until the wipe
// opt-in, which wipes it once and says so; adding a path extends the
// group and grows the pool.
func TestVolumeGroupsFromLVMCluster(t *testing.T) {
	env, m, nodeName := vgNode(t, "vg")
	c, ctx := env.Client, context.Background()
	thin, plain := fmt.Sprintf("vgt-%d-%d-a", os.Getpid(), counter.Add(1)), fmt.Sprintf("vgt-%d-%d-b", os.Getpid(), counter.Add(1))
	d1, d2, used := disksFor(t, thin, plain)
	cluster := twoClasses(nodeName, thin, plain, d1, used)
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	runVolumeGroups(t, env, m, nodeName, nil)

	first := testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		return firstState(byName[thin], byName[plain], d1)
	})
	group, err := lvm.FindVolumeGroupOf(ctx, m, thin)
	if err != nil || !group.HasTag(volumegroups.ManagedTag) {
		t.Fatalf("group %+v: %v", group, err)
	}
	if pool := first[thin].ThinPool.Size.Value(); pool < int64(group.Size)*45/100 || pool > int64(group.Size)*55/100 {
		t.Errorf("pool of %d bytes in a group of %d, want about 50%%", pool, group.Size)
	}
	if _, err := lvm.FindVolumeGroupOf(ctx, m, plain); err == nil {
		t.Fatalf("a group was made on a disk that holds a filesystem")
	}
	checkCapacity(t, c, nodeName, thin, first[thin].ThinPool.Size.Value()*10)
	// A volume that no LogicalVolume claims is reported, not removed.
	if err := m.CreateVolume(ctx, thin, lvm.VolumeSpec{Name: "stray", Size: 8 * mib, Pool: "pool"}); err != nil {
		t.Fatal(err)
	}

	// Add a path to one class, allow the wipe on the other.
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) {
		classes := l.Spec.Storage.DeviceClasses
		classes[0].DeviceSelector.Paths = append(classes[0].DeviceSelector.Paths, storagev1alpha1.DevicePath(d2))
		classes[1].DeviceSelector.ForceWipeDevicesAndDestroyAllData = ptr.To(true)
	})
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		a, b := byName[thin], byName[plain]
		if len(a.Devices) != 2 || a.ThinPool.Size.Cmp(*first[thin].ThinPool.Size) <= 0 {
			return fmt.Errorf("thin class after adding %s: %+v (pool was %s)", d2, a, first[thin].ThinPool.Size)
		}
		if b.State != storagev1alpha1.StateReady {
			return fmt.Errorf("class after the wipe opt-in: %+v", b)
		}
		return nil
	})
	st := &storagev1alpha1.LVMVolumeGroupNodeStatus{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nodeName, Name: nodeName}, st); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st.Status.Unclaimed) != "["+thin+"/stray]" {
		t.Errorf("unclaimed volumes %v, want [%s/stray]", st.Status.Unclaimed, thin)
	}
	if _, err := lvm.FindVolume(ctx, m, thin, "stray"); err != nil {
		t.Errorf("the unclaimed volume was touched: %v", err)
	}
	if len(st.Status.Wiped) != 1 || st.Status.Wiped[0].Device != used || fmt.Sprint(st.Status.Wiped[0].Signatures) != "[ext4]" {
		t.Fatalf("wipe record %+v", st.Status.Wiped)
	}

	// A path taken out of Git stays in the group, and the status says so.
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) {
		l.Spec.Storage.DeviceClasses[0].DeviceSelector.Paths = []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(d2)}
	})
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if a := byName[thin]; len(a.Devices) != 2 || fmt.Sprint(a.Unselected) != "["+d1+"]" {
			return fmt.Errorf("thin class after %s left its paths: %+v", d1, a)
		}
		return nil
	})
}

// disksFor attaches three disks, the last holding ext4, and removes the
// groups and labels the test makes on them.
func disksFor(t *testing.T, groups ...string) (d1, d2, used string) {
	t.Helper()
	d1, d2, used = testenv.LoopDisk(t, 256*mib), testenv.LoopDisk(t, 128*mib), testenv.LoopDisk(t, 128*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup(groups, d1, d2, used) })
	if out, err := exec.Command("mkfs.ext4", "-q", used).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	return d1, d2, used
}

// twoClasses is a thin class on d1 (and an optional path that is absent)
// and a thick one on a disk that holds data.
func twoClasses(name, thin, plain, d1, used string) *storagev1alpha1.LVMCluster {
	return &storagev1alpha1.LVMCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: name},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: thin, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(d1)},
				OptionalPaths: []storagev1alpha1.DevicePath{"/dev/strata-not-attached"}},
				ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool", SizePercent: 50}},
			{Name: plain, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(used)}}},
		}}},
	}
}

// checkCapacity: the Node says how big a new volume of the class can be.
func checkCapacity(t *testing.T, c client.Client, node, class string, want int64) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		n := &corev1.Node{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if got := n.Annotations[storagev1alpha1.CapacityAnnotationPrefix+class]; got != fmt.Sprint(want) {
			return fmt.Errorf("capacity annotation %q, want %d", got, want)
		}
		return nil
	})
}

// firstState: the thin class is made on d1; the class on a disk that
// holds ext4 is refused for it.
func firstState(a, b storagev1alpha1.DeviceClassNodeStatus, d1 string) error {
	if a.State != storagev1alpha1.StateReady || a.ThinPool == nil || fmt.Sprint(a.Devices) != "["+d1+"]" {
		return fmt.Errorf("thin class: %+v", a)
	}
	if b.State != storagev1alpha1.StateFailed || !strings.Contains(b.Reason, "holds data: ext4") || len(b.Excluded) != 1 {
		return fmt.Errorf("class on a disk with ext4: %+v", b)
	}
	return nil
}

// A class that opts in to discovery takes the node's blank disks, here
// the loop devices whose files are under the discovery directory: the
// blank one, not the one holding ext4 (listed with why), and no loop
// device elsewhere. A class without paths that does not opt in takes
// nothing and says how to name disks.
func TestBlankDisksAreDiscovered(t *testing.T) {
	env, m, nodeName := vgNode(t, "discover")
	c, ctx := env.Client, context.Background()
	class := fmt.Sprintf("disc-%d-%d", os.Getpid(), counter.Add(1))
	dir := t.TempDir()
	blank, used, elsewhere := testenv.LoopDiskIn(t, dir, 128*mib), testenv.LoopDiskIn(t, dir, 128*mib), testenv.LoopDisk(t, 128*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{class}, blank, used, elsewhere) })
	if out, err := exec.Command("mkfs.ext4", "-q", used).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: nodeName},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{DiscoverBlankDisks: ptr.To(true)}},
			{Name: class + "-none"},
		}}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	runVolumeGroups(t, env, m, nodeName, func(r *volumegroups.Reconciler) { r.DiscoverLoopDir = dir })
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if none := byName[class+"-none"]; none.State != storagev1alpha1.StateFailed || !strings.Contains(none.Reason, "discoverBlankDisks") {
			return fmt.Errorf("class without paths or the discovery opt-in: %+v, want Failed saying how to name disks", none)
		}
		st := byName[class]
		if st.State != storagev1alpha1.StateReady || fmt.Sprint(st.Devices) != "["+blank+"]" {
			return fmt.Errorf("class without paths: %+v, want ready on %s", st, blank)
		}
		// The node's own disks are listed too; of this test's, only used.
		for _, e := range st.Excluded {
			why := fmt.Sprint(e.Reasons)
			switch e.Name {
			case used:
				if !strings.Contains(why, "ext4") || !strings.Contains(why, "takes only blank disks") {
					return fmt.Errorf("%s excluded for %s; want its ext4, and how to use it", used, why)
				}
				return nil
			case blank, elsewhere:
				return fmt.Errorf("%s listed as excluded: %s", e.Name, why)
			}
		}
		return fmt.Errorf("excluded %+v, want %s among them", st.Excluded, used)
	})
	if pvs, err := m.PhysicalVolumes(ctx); err != nil || slices.ContainsFunc(pvs, func(pv lvm.PhysicalVolume) bool { return pv.Device == elsewhere }) {
		t.Errorf("a loop device outside the discovery directory was made a physical volume: %v, %v", pvs, err)
	}
}

// A device class removed from Git leaves its group and data on the node,
// listed as retained. Only the opt-in on the LVMCluster that made it
// counts, and it removes the group only once no LogicalVolume names it
// and it holds no logical volume (an etcd restore loses objects, not
// data).
func TestRemovedClassKeepsItsGroupUntilOptIn(t *testing.T) {
	env, m, nodeName := vgNode(t, "retain")
	c, ctx := env.Client, context.Background()
	gone, kept := fmt.Sprintf("rt-%d-%d-a", os.Getpid(), counter.Add(1)), fmt.Sprintf("rt-%d-%d-b", os.Getpid(), counter.Add(1))
	d1, d2 := testenv.LoopDisk(t, 128*mib), testenv.LoopDisk(t, 128*mib)
	t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{gone, kept}, d1, d2) })
	on := func(class, disk string) storagev1alpha1.DeviceClass {
		return storagev1alpha1.DeviceClass{Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{
			Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(disk)}}}
	}
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: nodeName},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{on(gone, d1), on(kept, d2)}}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	user := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: gone + "-user"},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: "user", NodeName: nodeName, DeviceClass: gone, Size: resource.MustParse("8Mi")}}
	if err := c.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	runVolumeGroups(t, env, m, nodeName, nil)
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if byName[gone].State != storagev1alpha1.StateReady || byName[kept].State != storagev1alpha1.StateReady {
			return fmt.Errorf("classes %+v", byName)
		}
		return nil
	})

	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) { l.Spec.Storage.DeviceClasses = l.Spec.Storage.DeviceClasses[1:] })
	waitRetained(t, c, nodeName, gone, "allow-data-loss")
	bystander := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-other", Namespace: nodeName,
		Annotations: map[string]string{storagev1alpha1.AllowDataLossAnnotation: "true"}},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{Name: gone + "x",
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "strata.dev/no-such-label", Operator: corev1.NodeSelectorOpExists}}}}}}}}}}
	if err := c.Create(ctx, bystander); err != nil {
		t.Fatal(err)
	}
	waitRetained(t, c, nodeName, gone, "on LVMCluster "+nodeName+"/"+nodeName+", which made it")
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) {
		l.Annotations = map[string]string{storagev1alpha1.AllowDataLossAnnotation: "true"}
	})
	waitRetained(t, c, nodeName, gone, user.Name)
	if _, err := lvm.FindVolumeGroupOf(ctx, m, gone); err != nil {
		t.Fatalf("the group was removed while a LogicalVolume used it: %v", err)
	}

	// The volume exists in lvm2 with no object naming it, as after an
	// etcd restore.
	if err := m.CreateVolume(ctx, gone, lvm.VolumeSpec{Name: "restored", Size: 8 * mib}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, user); err != nil {
		t.Fatal(err)
	}
	waitRetained(t, c, nodeName, gone, "holds logical volumes restored")
	if err := m.RemoveVolume(ctx, gone, "restored"); err != nil {
		t.Fatal(err)
	}
	// lvm2 is read again on a change in the API (or once a minute).
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) { l.Labels = map[string]string{"nudge": "1"} })
	testenv.Eventually(t, timeout, func() error {
		if _, err := lvm.FindVolumeGroupOf(ctx, m, gone); !errors.Is(err, lvm.ErrNotFound) {
			return fmt.Errorf("group %s after the opt-in: %v", gone, err)
		}
		return nil
	})
	if _, err := lvm.FindVolumeGroupOf(ctx, m, kept); err != nil {
		t.Errorf("the class still in Git lost its group: %v", err)
	}
	waitRetained(t, c, nodeName, "", "")
}

// waitRetained waits until the node lists exactly group as retained for a
// reason naming want, or, with group empty, lists none.
func waitRetained(t *testing.T, c client.Client, node, group, want string) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		st := &storagev1alpha1.LVMVolumeGroupNodeStatus{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: node, Name: node}, st); err != nil {
			return err
		}
		r := st.Status.Retained
		if group == "" && len(r) == 0 || len(r) == 1 && r[0].Name == group && strings.Contains(r[0].Reason, want) {
			return nil
		}
		return fmt.Errorf("retained %+v, want %q for %q", r, group, want)
	})
}

// vgNode is a node of one volume-group test's own: a Node and a namespace
// of its name, and a volume manager (lvmtest.Manager).
func vgNode(t *testing.T, prefix string) (*testenv.Env, lvm.Manager, string) {
	t.Helper()
	testenv.NeedRoot(t, "volume groups")
	testenv.NeedTools(t, "lvm", "losetup", "lsblk", "wipefs", "mkfs.ext4")
	env := testenv.Get(t)
	// The pid too: groups are tagged with the namespace, and another test
	// run on this machine must not find its own among them.
	name := fmt.Sprintf("%s-node-%d-%d", prefix, os.Getpid(), counter.Add(1))
	testenv.Namespace(t, env.Client, name)
	if err := env.Client.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return env, lvmtest.Manager(t), name
}

// runVolumeGroups runs the node's volume-group reconciler, as tweak sets it.
func runVolumeGroups(t *testing.T, env *testenv.Env, m lvm.Manager, node string, tweak func(*volumegroups.Reconciler)) (stop func()) {
	return testenv.RunManager(t, env, func(mgr manager.Manager) error {
		r := &volumegroups.Reconciler{Client: mgr.GetClient(), Node: node, Namespace: node, LVM: m,
			Disks: disks.NewInspector(m), MinDeviceSize: 64 * mib}
		if tweak != nil {
			tweak(r)
		}
		return r.SetupWithManager(mgr)
	})
}

// What the agent cannot evaluate is reported, never read as "not for this
// node" or "not there": a nodeSelector that does not parse, and a path
// that exists but is no disk.
func TestClassesThatCannotBeEvaluatedSaySo(t *testing.T) {
	env, m, nodeName := vgNode(t, "badsel")
	c, ctx := env.Client, context.Background()
	badSel, notDisk := fmt.Sprintf("bs-%d-%d", os.Getpid(), counter.Add(1)), fmt.Sprintf("nd-%d-%d", os.Getpid(), counter.Add(1))
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: nodeName},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: badSel, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{"/dev/null"}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "disks", Operator: corev1.NodeSelectorOpGt, Values: []string{"many"}}}}}}},
			{Name: notDisk, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{"/dev/null"}}},
		}}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	runVolumeGroups(t, env, m, nodeName, nil)
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if st := byName[badSel]; st.State != storagev1alpha1.StateFailed || !strings.Contains(st.Reason, "nodeSelector cannot be evaluated") {
			return fmt.Errorf("class with a bad nodeSelector: %+v, want Failed naming the selector", st)
		}
		if st := byName[notDisk]; st.State != storagev1alpha1.StateFailed || !strings.Contains(st.Reason, "/dev/null: cannot be inspected") || strings.Contains(st.Reason, "not found") {
			return fmt.Errorf("class on /dev/null: %+v, want Failed saying it cannot be inspected", st)
		}
		return nil
	})
}

// An lvm2 agent on a kernel without device-mapper fails its classes,
// saying so, and makes no group: it never keeps data in loop files
// unasked.
func TestNoDeviceMapperFailsTheClasses(t *testing.T) {
	env, m, nodeName := vgNode(t, "nodm")
	c, ctx := env.Client, context.Background()
	class := fmt.Sprintf("nodm-%d-%d", os.Getpid(), counter.Add(1))
	disk := testenv.LoopDisk(t, 128*mib)
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: nodeName},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(disk)}}}}}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	runVolumeGroups(t, env, m, nodeName, func(r *volumegroups.Reconciler) { r.NoDeviceMapper = true })
	testenv.WaitDeviceClasses(t, c, nodeName, func(byName map[string]storagev1alpha1.DeviceClassNodeStatus) error {
		if st := byName[class]; st.State != storagev1alpha1.StateFailed || !strings.Contains(st.Reason, "no device-mapper") {
			return fmt.Errorf("class on a node without device-mapper: %+v, want Failed saying so", st)
		}
		return nil
	})
	if _, err := lvm.FindVolumeGroupOf(ctx, m, class); err == nil {
		t.Fatal("a volume group was made on a node whose lvm2 cannot make logical volumes")
	}
}
