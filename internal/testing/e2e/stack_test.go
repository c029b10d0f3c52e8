// Package e2e is strata's end-to-end suite: strata installed with its
// chart into the local cluster (internal/local/cluster), with real
// kubelets, runtimes and pods. `make e2e` runs it alone.
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/local/release"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// stack is the cluster every test of the suite shares, started by the
// first test that needs it.
var stack struct {
	once sync.Once
	// tempDir is the cluster's directory when the suite made it, removed
	// after the suite.
	tempDir string
	cluster *cluster.Cluster
	client  client.Client
	err     error
	skip    string
	// release is the source tree's, installed; pause and exampleApp are
	// its images, by digest, as the nodes pull them.
	release           *release.Built
	pause, exampleApp string
}

const namespace = "strata-system"

// network is the suite's cluster network; pods reach this machine at its
// HostIP.
var network = kubenode.Network{Bridge: "strata-e0", Prefix: netip.MustParsePrefix("10.79.0.0/24"),
	PodPrefix: netip.MustParsePrefix("10.246.0.0/16")}

// customize are changes to the cluster's options made by the files of
// other build tags (conformance_test.go).
var customize []func(*cluster.Options) error

// afterStart are steps of the files of other suites once the cluster
// runs, before strata is installed, such as pushing their images.
var afterStart []func(context.Context, *cluster.Cluster) error

func TestMain(m *testing.M) {
	code := m.Run()
	if stack.cluster != nil {
		if err := stack.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
			code = 1
		}
	}
	if stack.tempDir != "" && code == 0 { // kept to read when something failed
		if err := os.RemoveAll(stack.tempDir); err != nil {
			fmt.Fprintln(os.Stderr, "removing the cluster's directory:", err)
		}
	}
	os.Exit(code)
}

// start returns the shared cluster with strata installed and a device
// class "fast" (thin, xfs) on each node's first disk.
func start(t testing.TB) (*cluster.Cluster, client.Client) {
	t.Helper()
	testenv.NeedRoot(t, "the local cluster's nodes")
	stack.once.Do(func() { stack.err = startStack() })
	if stack.skip != "" {
		testenv.Unavailable(t, stack.skip)
	}
	if stack.err != nil {
		t.Fatal(stack.err)
	}
	return stack.cluster, stack.client
}

func startStack() error {
	root := testenv.RepoRoot()
	bin := filepath.Join(root, "bin")
	if stack.skip = testenv.LocalClusterMissing(); stack.skip != "" {
		return nil
	}
	ctx := context.Background()
	built, err := release.BuildLocal(ctx, root)
	if err != nil {
		return err
	}
	stack.release = built
	if stack.pause, err = built.Ref(cluster.RegistryName, "pause"); err != nil {
		return err
	}
	if stack.exampleApp, err = built.Ref(cluster.RegistryName, "example-app"); err != nil {
		return err
	}
	dir := os.Getenv("STRATA_TEST_CLUSTER_DIR") // kept after the suite, to read its logs
	if dir == "" {
		if dir, err = os.MkdirTemp("", "strata-e2e-"); err != nil {
			return err
		}
		stack.tempDir = dir
	}
	o := cluster.Defaults(dir, testenv.AssetsDir())
	o.Nodes = []string{"e2e-a", "e2e-b"}
	o.Network = network
	o.ServiceCIDR = netip.MustParsePrefix("10.98.0.0/16")
	o.Registry, o.PauseImage, o.Disks = filepath.Join(bin, "registry"), stack.pause, []int64{4 << 30, 2 << 30}
	// Both nodes are also btrfs storage hosts, each's second disk the base.
	o.BtrfsMounts, o.Labels = btrfsHost.Mounts(2), btrfsHost.Labels()
	o.CRDDirs = []string{filepath.Join(root, "charts", "strata", "crds")}
	for _, change := range customize {
		if err := change(&o); err != nil {
			return err
		}
	}
	c, err := cluster.Start(ctx, o)
	if err != nil {
		return err
	}
	stack.cluster = c
	if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
		return err
	}
	for _, step := range afterStart {
		if err := step(ctx, c); err != nil {
			return err
		}
	}
	s := scheme.New()
	if err := snapshotv1.AddToScheme(s); err != nil {
		return err
	}
	if stack.client, err = client.New(c.Config, client.Options{Scheme: s}); err != nil {
		return err
	}
	err = release.Install(ctx, stack.client, release.Options{Release: built, Registry: c.Registry(), RegistryName: cluster.RegistryName,
		Helm: filepath.Join(bin, "helm"), Kubectl: filepath.Join(testenv.AssetsDir(), "kubectl"), Kubeconfig: c.KubeconfigPath(), Namespace: namespace,
		Set: append(btrfsHost.Values(), release.ControllersOn(c.Nodes[1].Name())...), Objects: btrfsHost.Secrets(namespace)}, 4*time.Minute)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, c.Nodes[0].Logs(20))
	}
	if err := deviceClass(ctx, stack.client); err != nil {
		return err
	}
	return makeBtrfsClasses(ctx, stack.client, c.Nodes)
}

// deviceClass makes the LVMCluster of the suite and waits for its
// StorageClass.
func deviceClass(ctx context.Context, c client.Client) error {
	lvm := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "e2e", Namespace: namespace},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{
			Name: "fast", Default: true, FSType: "xfs",
			DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(kubenode.DiskPath(1))}},
			ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool", SizePercent: 90, OverprovisionRatio: 10},
		}}}}}
	if err := c.Create(ctx, lvm); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := c.Get(ctx, client.ObjectKey{Name: storagev1alpha1.StorageClassName("fast")}, &storagev1.StorageClass{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("StorageClass %s not made after 3m: %w", storagev1alpha1.StorageClassName("fast"), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// appPod runs the example app on a claim mounted at /data.
func appPod(ns, name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: stack.exampleApp, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"serve", "/data"}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
	}}
}
