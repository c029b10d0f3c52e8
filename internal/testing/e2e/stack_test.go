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
	releaseOnce       sync.Once
	release           *release.Built
	releaseErr        error
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
	if stack.skip = testenv.LocalClusterMissing(); stack.skip != "" {
		return nil
	}
	ctx := context.Background()
	if err := localRelease(ctx); err != nil {
		return err
	}
	dir := os.Getenv("STRATA_TEST_CLUSTER_DIR") // kept after the suite, to read its logs
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "strata-e2e-"); err != nil {
			return err
		}
		stack.tempDir = dir
	}
	c, cl, err := newCluster(ctx, suiteCluster{dir: dir, nodes: []string{"e2e-a", "e2e-b"}, network: network,
		serviceCIDR: netip.MustParsePrefix("10.98.0.0/16"), hosts: btrfsHost, customize: customize})
	stack.cluster, stack.client = c, cl
	if err != nil {
		return err
	}
	for _, step := range afterStart {
		if err := step(ctx, c); err != nil {
			return err
		}
	}
	if err := install(ctx, c, cl, stack.release, btrfsHost, nil); err != nil {
		return err
	}
	return storageClasses(ctx, c, cl, btrfsHost)
}

// localRelease builds the source tree's release once (bin/release), and
// names its pause and example app images as the nodes pull them.
func localRelease(ctx context.Context) error {
	stack.releaseOnce.Do(func() {
		built, err := release.BuildLocal(ctx, testenv.RepoRoot())
		if err == nil {
			stack.pause, err = built.Ref(cluster.RegistryName, "pause")
		}
		if err == nil {
			stack.exampleApp, err = built.Ref(cluster.RegistryName, "example-app")
		}
		stack.release, stack.releaseErr = built, err
	})
	return stack.releaseErr
}

// suiteCluster is a cluster of the suite: its directory, nodes, networks
// and btrfs storage hosts.
type suiteCluster struct {
	dir         string
	nodes       []string
	network     kubenode.Network
	serviceCIDR netip.Prefix
	hosts       release.BtrfsHost
	customize   []func(*cluster.Options) error
}

// newCluster starts a cluster, pulling from its own registry, and waits
// for its nodes; strata is not installed yet.
func newCluster(ctx context.Context, s suiteCluster) (*cluster.Cluster, client.Client, error) {
	o := cluster.Defaults(s.dir, testenv.AssetsDir())
	o.Nodes, o.Network, o.ServiceCIDR = s.nodes, s.network, s.serviceCIDR
	o.Registry, o.PauseImage, o.Disks = filepath.Join(testenv.RepoRoot(), "bin", "registry"), stack.pause, []int64{4 << 30, 2 << 30}
	// Every host node's second disk is its btrfs base.
	o.BtrfsMounts, o.Labels = s.hosts.Mounts(2), s.hosts.Labels()
	o.CRDDirs = []string{filepath.Join(testenv.RepoRoot(), "charts", "strata", "crds")}
	for _, change := range s.customize {
		if err := change(&o); err != nil {
			return nil, nil, err
		}
	}
	c, err := cluster.Start(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
		return c, nil, err
	}
	sch := scheme.New()
	if err := snapshotv1.AddToScheme(sch); err != nil {
		return c, nil, err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: sch})
	return c, cl, err
}

// populatorEndpoints lets VolumeImages name any endpoint: the suite's
// MinIO listens on a port chosen as each test starts. The list itself is
// tested in storage/imagepopulator.
const populatorEndpoints = "populator.endpoints={*}"

// install installs or upgrades to built, as docs/install.md says, with
// the suite's values; progress hears each step as it ends.
func install(ctx context.Context, c *cluster.Cluster, cl client.Client, built *release.Built, hosts release.BtrfsHost, progress func(string)) error {
	err := release.Install(ctx, cl, release.Options{Release: built, Registry: c.Registry(), RegistryName: cluster.RegistryName,
		Kubectl: filepath.Join(testenv.AssetsDir(), "kubectl"), Kubeconfig: c.KubeconfigPath(), Namespace: namespace,
		Set: append(append(hosts.Values(), release.ControllersOn(c.Nodes[1].Name())...), alertsToTheHost(), populatorEndpoints), Objects: hosts.Secrets(namespace), Progress: progress}, 4*time.Minute)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, c.Nodes[0].Logs(20))
	}
	return nil
}

// storageClasses makes the LVM class "fast" and the btrfs classes.
func storageClasses(ctx context.Context, c *cluster.Cluster, cl client.Client, hosts release.BtrfsHost) error {
	if err := deviceClass(ctx, cl); err != nil {
		return err
	}
	return makeBtrfsClasses(ctx, cl, c.Nodes, hosts)
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
