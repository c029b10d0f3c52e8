package lvmnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/lvmtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/lvmnode"
	"github.com/strata-gitops/strata/storage/lvm"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	mib     = 1 << 20
	timeout = 30 * time.Second
)

var counter atomic.Int32

// node is one agent's world: real volume groups on loop disks (a thin
// class and a thick one), volumes from the loopback manager, and the
// LVMCluster that names the classes.
type node struct {
	t           *testing.T
	c           client.Client
	m           lvm.Manager
	thin, thick string
	name        string
}

func newNode(t *testing.T, m lvm.Manager) *node {
	t.Helper()
	testenv.NeedRoot(t, "volume groups")
	testenv.NeedTools(t, "lvm", "losetup")
	env := testenv.Get(t)
	n := &node{t: t, c: env.Client, m: m, name: fmt.Sprintf("node-%d", counter.Add(1))}
	n.thin, n.thick = fmt.Sprintf("lvthin%d%s", os.Getpid(), n.name), fmt.Sprintf("lvthick%d%s", os.Getpid(), n.name)
	ctx := context.Background()
	testenv.Namespace(t, n.c, n.name)
	for _, vg := range []string{n.thin, n.thick} {
		disk := testenv.LoopDisk(t, 256*mib)
		if err := m.CreateVolumeGroup(ctx, vg, []string{disk}, []string{"strata.dev/managed"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{vg}, disk) })
	}
	if err := m.CreateThinPool(ctx, n.thin, lvm.ThinPoolSpec{Name: "pool", Size: 128 * mib}); err != nil {
		t.Fatal(err)
	}
	cluster := &storagev1alpha1.LVMCluster{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: n.name},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: n.thin, ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool"}},
			{Name: n.thick},
		}}},
	}
	if err := n.c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) start() func() {
	return testenv.RunManager(n.t, testenv.Get(n.t), func(mgr manager.Manager) error {
		return (&lvmnode.LogicalVolumeReconciler{Client: mgr.GetClient(), Node: n.name, LVM: n.m,
			Classes: lvmnode.ClusterClasses{Client: mgr.GetClient(), Namespace: n.name}}).SetupWithManager(mgr)
	})
}

func (n *node) volume(class, size, source string) *storagev1alpha1.LogicalVolume {
	n.t.Helper()
	lv := &storagev1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-lv-%d", n.name, counter.Add(1))},
		Spec: storagev1alpha1.LogicalVolumeSpec{NodeName: n.name, DeviceClass: class,
			Size: resource.MustParse(size), Source: source},
	}
	lv.Spec.Name = lv.Name
	if err := n.c.Create(context.Background(), lv); err != nil {
		n.t.Fatal(err)
	}
	return lv
}

// waitReady waits for Ready with reason and returns the object.
func (n *node) wait(lv *storagev1alpha1.LogicalVolume, status metav1.ConditionStatus, reason string) *storagev1alpha1.LogicalVolume {
	n.t.Helper()
	got := &storagev1alpha1.LogicalVolume{}
	testenv.Eventually(n.t, timeout, func() error {
		if err := n.c.Get(context.Background(), client.ObjectKeyFromObject(lv), got); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, meta.ReadyCondition)
		if c == nil || c.Status != status || c.Reason != reason || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("%s: want Ready=%s/%s, have %+v", lv.Name, status, reason, got.Status)
		}
		return nil
	})
	return got
}

// deleteAndWait deletes the object and waits until the agent let it go.
func (n *node) deleteAndWait(obj *storagev1alpha1.LogicalVolume) {
	n.t.Helper()
	ctx := context.Background()
	if err := n.c.Delete(ctx, obj); err != nil {
		n.t.Fatal(err)
	}
	testenv.Eventually(n.t, timeout, func() error {
		if err := n.c.Get(ctx, client.ObjectKeyFromObject(obj), &storagev1alpha1.LogicalVolume{}); err == nil {
			return fmt.Errorf("%s still exists", obj.Name)
		}
		return nil
	})
}

// A volume's whole life through its LogicalVolume: created, grown,
// snapshotted, refused for space, removed with its object.
func TestLogicalVolumeLifecycle(t *testing.T) {
	m := lvmtest.Manager(t)
	n := newNode(t, m)
	n.start()
	ctx := context.Background()

	v := n.wait(n.volume(n.thin, "64Mi", ""), "True", meta.SucceededReason)
	if v.Status.Device == "" || v.Status.CurrentSize.Value() < 64*mib {
		t.Fatalf("status %+v", v.Status)
	}
	if info, err := os.Stat(v.Status.Device); err != nil || info.Mode()&os.ModeDevice == 0 {
		t.Fatalf("device %s: %v %v", v.Status.Device, info, err)
	}
	lv, err := lvm.FindVolume(ctx, m, n.thin, v.Spec.Name)
	if err != nil || lv.Kind != lvm.Thin || lv.Pool != "pool" || len(lv.Tags) != 1 || !strings.HasSuffix(lv.Tags[0], "="+v.Name) {
		t.Fatalf("volume %+v: %v", lv, err)
	}

	testenv.Update(t, n.c, v, func(l *storagev1alpha1.LogicalVolume) { l.Spec.Size = resource.MustParse("96Mi") })
	testenv.Eventually(t, timeout, func() error {
		got := &storagev1alpha1.LogicalVolume{}
		if err := n.c.Get(ctx, client.ObjectKeyFromObject(v), got); err != nil {
			return err
		}
		if got.Status.CurrentSize == nil || got.Status.CurrentSize.Value() < 96*mib {
			return fmt.Errorf("size %v after growing to 96Mi", got.Status.CurrentSize)
		}
		return nil
	})

	snap := n.wait(n.volume(n.thin, "96Mi", v.Name), "True", meta.SucceededReason)
	if lv, err := lvm.FindVolume(ctx, m, n.thin, snap.Spec.Name); err != nil || lv.Origin != v.Spec.Name {
		t.Fatalf("snapshot %+v: %v", lv, err)
	}

	n.wait(n.volume(n.thick, "1Gi", ""), "False", lvmnode.NoSpaceReason)
	n.wait(n.volume("no-such-class", "1Mi", ""), "False", lvmnode.ClassUnknownReason)

	for _, obj := range []*storagev1alpha1.LogicalVolume{snap, v} {
		n.deleteAndWait(obj)
		if _, err := lvm.FindVolume(ctx, m, n.thin, obj.Spec.Name); !errors.Is(err, lvm.ErrNotFound) {
			t.Fatalf("volume of deleted %s: %v", obj.Name, err)
		}
	}
}

// crashing fails the first volume creation after making the volume, as an
// agent killed between the two would leave it.
type crashing struct {
	lvm.Manager
	crashed atomic.Bool
}

func (c *crashing) CreateVolume(ctx context.Context, vg string, spec lvm.VolumeSpec) error {
	if err := c.Manager.CreateVolume(ctx, vg, spec); err != nil {
		return err
	}
	if c.crashed.CompareAndSwap(false, true) {
		return errors.New("agent killed after creating the volume")
	}
	return nil
}

// A crash between making the volume and recording it neither loses nor
// duplicates it: the retry finds it and records it.
func TestLogicalVolumeCreationSurvivesACrash(t *testing.T) {
	m := &crashing{Manager: lvmtest.Manager(t)}
	n := newNode(t, m)
	n.start()
	v := n.wait(n.volume(n.thick, "16Mi", ""), "True", meta.SucceededReason)
	if !m.crashed.Load() {
		t.Fatal("the crash was not injected")
	}
	lvs, err := m.LogicalVolumes(context.Background(), n.thick)
	if err != nil {
		t.Fatal(err)
	}
	if len(lvs) != 1 || lvs[0].Name != v.Spec.Name {
		t.Fatalf("volumes after a crash and retry: %+v", lvs)
	}
}

// The agent leaves other nodes' LogicalVolumes alone.
func TestOtherNodesVolumesAreLeftAlone(t *testing.T) {
	n := newNode(t, lvmtest.Manager(t))
	n.start()
	name := fmt.Sprintf("%s-elsewhere", n.name)
	foreign := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: name, NodeName: "elsewhere", DeviceClass: n.thin,
			Size: resource.MustParse("8Mi")}}
	if err := n.c.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	mine := n.volume(n.thin, "8Mi", "")
	// The foreign one came first: one worker, in order, so it would have
	// been reconciled before this one is Ready.
	n.wait(mine, "True", meta.SucceededReason)
	got := &storagev1alpha1.LogicalVolume{}
	if err := n.c.Get(context.Background(), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
		t.Fatalf("another node's LogicalVolume was reconciled: %+v", got)
	}
}

// A volume of the same name that is not the object's, untagged or tagged
// for another LogicalVolume, is never adopted, grown or removed, even
// when its colliding object is deleted.
func TestVolumesNotTaggedForTheObjectAreNeverTouched(t *testing.T) {
	m := lvmtest.Manager(t)
	n := newNode(t, m)
	n.start()
	ctx := context.Background()
	for i, tags := range [][]string{nil, {storagev1alpha1.LogicalVolumeTag("someone-else")}} {
		name := fmt.Sprintf("%s-theirs-%d", n.name, i)
		if err := m.CreateVolume(ctx, n.thin, lvm.VolumeSpec{Name: name, Size: 8 * mib, Pool: "pool", Tags: tags}); err != nil {
			t.Fatal(err)
		}
		lv := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name + "-claim"},
			Spec: storagev1alpha1.LogicalVolumeSpec{Name: name, NodeName: n.name, DeviceClass: n.thin, Size: resource.MustParse("16Mi")}}
		if err := n.c.Create(ctx, lv); err != nil {
			t.Fatal(err)
		}
		got := n.wait(lv, "False", lvmnode.NotOwnedReason)
		if c := apimeta.FindStatusCondition(got.Status.Conditions, meta.ReadyCondition); !strings.Contains(c.Message, "never adopts") {
			t.Fatalf("condition %q does not say the volume is not adopted", c.Message)
		}
		n.deleteAndWait(got)
		vol, err := lvm.FindVolume(ctx, m, n.thin, name)
		if err != nil || vol.Size != 8*mib {
			t.Fatalf("the volume that was not the object's, after the object went: %+v, %v; want it there at 8 MiB", vol, err)
		}
	}
}
