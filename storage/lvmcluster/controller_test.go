package lvmcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvmcluster"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const timeout = 30 * time.Second

var counter atomic.Int32

func start(t *testing.T) client.Client {
	env := testenv.Get(t)
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return (&lvmcluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	return env.Client
}

func namespace(t *testing.T, c client.Client) string {
	ns := fmt.Sprintf("lvmc-%d-%d", os.Getpid(), counter.Add(1))
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func storageClassOf(t *testing.T, c client.Client, class string, check func(*storagev1.StorageClass) error) *storagev1.StorageClass {
	t.Helper()
	sc := &storagev1.StorageClass{}
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Name: storagev1alpha1.StorageClassName(class)}, sc); err != nil {
			return err
		}
		return check(sc)
	})
	return sc
}

// Each device class gets its StorageClass, with the options, the default
// marker and the fstype; a changed fstype replaces it.
func TestStorageClasses(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	ns := namespace(t, c)
	fast, bulk := ns+"-fast", ns+"-bulk"
	cluster := &storagev1alpha1.LVMCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: fast, Default: true, ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool"},
				StorageClassOptions: &storagev1alpha1.StorageClassOptions{AdditionalParameters: map[string]string{"x": "y"},
					AdditionalLabels: map[string]string{"team": "db"}}},
			{Name: bulk, FSType: "ext4", StorageClassOptions: &storagev1alpha1.StorageClassOptions{
				ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain)}},
		}}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	storageClassOf(t, c, fast, func(sc *storagev1.StorageClass) error { return checkFast(sc, fast) })
	old := storageClassOf(t, c, bulk, func(sc *storagev1.StorageClass) error {
		if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain || sc.Parameters["csi.storage.k8s.io/fstype"] != "ext4" ||
			sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "false" {
			return fmt.Errorf("bulk StorageClass %+v", sc)
		}
		return nil
	})

	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) { l.Spec.Storage.DeviceClasses[1].FSType = "xfs" })
	storageClassOf(t, c, bulk, func(sc *storagev1.StorageClass) error {
		if sc.UID == old.UID || sc.Parameters["csi.storage.k8s.io/fstype"] != "xfs" {
			return fmt.Errorf("bulk StorageClass not replaced: %+v", sc.Parameters)
		}
		return nil
	})

	// Deleting the LVMCluster keeps a StorageClass that a volume uses.
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-pv"}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: storagev1alpha1.StorageClassName(fast), Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: storagev1alpha1.CSIDriver, VolumeHandle: "x"}}}}
	if err := c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	// With a volume on it, the class's filesystem no longer changes.
	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) { l.Spec.Storage.DeviceClasses[0].FSType = "ext4" })
	refused := waitState(t, c, cluster, "Failed")
	if msg := readyMessage(refused); !strings.Contains(msg, "fstype cannot change from xfs to ext4 while 1 volumes use it") {
		t.Fatalf("fstype change of a class in use: %q", msg)
	}
	storageClassOf(t, c, fast, func(sc *storagev1.StorageClass) error { return checkFast(sc, fast) })

	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: storagev1alpha1.StorageClassName(bulk)}, &storagev1.StorageClass{}); err == nil {
			return fmt.Errorf("unused StorageClass still there")
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKey{Name: storagev1alpha1.StorageClassName(fast)}, &storagev1.StorageClass{}); err != nil {
		t.Fatalf("the StorageClass a volume uses was removed: %v", err)
	}
}

// The LVMCluster's status sums up what the agents report.
func TestStatusFromNodes(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	ns := namespace(t, c)
	class := ns + "-a"
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{Name: class}}}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, cluster, "Progressing")
	report := func(node, state, reason string) {
		st := &storagev1alpha1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: ns}}
		if err := c.Get(ctx, client.ObjectKeyFromObject(st), st); err != nil {
			if err := c.Create(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		st.Status.DeviceClasses = []storagev1alpha1.DeviceClassNodeStatus{{Node: node, VolumeGroup: class, State: state, Reason: reason}}
		if err := c.Status().Update(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	report("n1", "Ready", "")
	waitState(t, c, cluster, "Ready")
	report("n2", "Failed", "required devices cannot be used")
	got := waitState(t, c, cluster, "Degraded")
	if len(got.Status.DeviceClassStatuses) != 1 || len(got.Status.DeviceClassStatuses[0].Nodes) != 2 {
		t.Errorf("per-node statuses %+v", got.Status.DeviceClassStatuses)
	}
}

// checkFast: the options, the default marker and xfs by default.
func checkFast(sc *storagev1.StorageClass, class string) error {
	if sc.Provisioner != storagev1alpha1.CSIDriver || sc.Parameters[storagev1alpha1.DeviceClassParameter] != class ||
		sc.Parameters["csi.storage.k8s.io/fstype"] != "xfs" || sc.Parameters["x"] != "y" || sc.Labels["team"] != "db" ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || !*sc.AllowVolumeExpansion ||
		sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
		return fmt.Errorf("fast StorageClass %+v", sc)
	}
	return nil
}

func readyMessage(obj *storagev1alpha1.LVMCluster) string {
	for _, c := range obj.Status.Conditions {
		if c.Type == "Ready" {
			return c.Message
		}
	}
	return ""
}

func waitState(t *testing.T, c client.Client, obj *storagev1alpha1.LVMCluster, state string) *storagev1alpha1.LVMCluster {
	t.Helper()
	got := &storagev1alpha1.LVMCluster{}
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
			return err
		}
		if got.Status.State != state {
			return fmt.Errorf("state %q, want %q: %+v", got.Status.State, state, got.Status.Conditions)
		}
		return nil
	})
	return got
}

// Thin classes get a VolumeSnapshotClass once the cluster serves the
// snapshot API; thick classes never do; deleting the LVMCluster removes it.
func TestSnapshotClasses(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	installSnapshotAPI(t, c)
	ns := namespace(t, c)
	obj := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: "snapthin", ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool"}},
			{Name: "snapthick"},
		}}}}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	get := func(class string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(lvmcluster.SnapshotClassKind)
		return u, c.Get(ctx, client.ObjectKey{Name: storagev1alpha1.StorageClassName(class)}, u)
	}
	testenv.Eventually(t, timeout, func() error {
		u, err := get("snapthin")
		if err != nil {
			return err
		}
		params, _, _ := unstructured.NestedStringMap(u.Object, "parameters")
		if u.Object["driver"] != storagev1alpha1.CSIDriver || params[storagev1alpha1.DeviceClassParameter] != "snapthin" {
			return fmt.Errorf("VolumeSnapshotClass is %v", u.Object)
		}
		return nil
	})
	storageClassOf(t, c, "snapthick", func(*storagev1.StorageClass) error { return nil })
	if _, err := get("snapthick"); !apierrors.IsNotFound(err) {
		t.Errorf("a thick class has a VolumeSnapshotClass: %v", err)
	}
	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, func() error {
		if _, err := get("snapthin"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VolumeSnapshotClass still there after the LVMCluster went: %v", err)
		}
		return nil
	})
}

// installSnapshotAPI installs testdata's VolumeSnapshotClass CRD.
func installSnapshotAPI(t *testing.T, c client.Client) {
	t.Helper()
	data, err := os.ReadFile("testdata/volumesnapshotclass-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not established yet", crd.Name)
	})
}
