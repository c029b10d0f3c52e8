package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/images"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// startCluster starts two nodes on a network of the test's own, apart
// from `strata up`'s.
func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(context.Background(), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Log(n.Logs(40))
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := c.WaitReady(context.Background(), 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(testenv.RepoRoot(), "bin")
	if err := images.Push(context.Background(), c.Registry(), images.Pause(bin, pauseRef), exampleApp(bin)); err != nil {
		t.Fatal(err)
	}
	return c
}

// testOptions are two nodes on a network of the test's own.
func testOptions(t *testing.T) cluster.Options {
	t.Helper()
	testenv.NeedRoot(t, "network namespaces, cgroups and a container runtime")
	bin := filepath.Join(testenv.RepoRoot(), "bin")
	for _, name := range []string{"kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(testenv.AssetsDir(), name)); err != nil {
			testenv.Unavailable(t, name+" is not built: run hack/control-plane.sh nodes")
		}
	}
	testenv.NeedTools(t, "containerd", "runc", "ctr", "nsenter", "iptables")
	if err := images.BuildCommands(testenv.RepoRoot(), bin); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("STRATA_TEST_CLUSTER_DIR") // kept after the test, to read its logs
	if dir == "" {
		dir = t.TempDir()
	}
	o := cluster.Defaults(dir, testenv.AssetsDir())
	o.Nodes = []string{"test-a", "test-b"}
	o.Network = kubenode.Network{Bridge: "strata-t0", Prefix: netip.MustParsePrefix("10.78.0.0/24"),
		PodPrefix: netip.MustParsePrefix("10.245.0.0/16")}
	o.ServiceCIDR = netip.MustParsePrefix("10.97.0.0/16")
	o.Registry, o.PauseImage = filepath.Join(bin, "registry"), pauseRef
	return o
}

// The test's images, built from bin/ and pushed to the cluster's
// registry, which the nodes know as strata.local.
const (
	pauseRef      = cluster.RegistryName + "/test/pause:1"
	exampleAppRef = cluster.RegistryName + "/test/example-app:1"
)

func exampleApp(bin string) images.Image {
	return images.Image{Ref: exampleAppRef, Entrypoint: []string{"/example-app"},
		Files: []images.File{{Path: "/example-app", Source: filepath.Join(bin, "example-app"), Mode: 0o755}, {Path: "/tmp/.keep"}}}
}

// A run that ended without stopping (its process killed) leaves its
// processes, namespaces and mounts; the next start on the same directory
// clears them and comes up, and its stop leaves nothing behind.
func TestRestartAfterACrash(t *testing.T) {
	o := testOptions(t)
	ctx := context.Background()
	crashed, err := cluster.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	// Should the test end before the second start clears them.
	t.Cleanup(func() { _ = crashed.Stop() })
	if err := crashed.WaitReady(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// crashed is never stopped: the next start finds all it runs.
	again, err := cluster.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.WaitReady(ctx, 3*time.Minute); err != nil {
		t.Error(err)
	}
	if err := again.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("pgrep", "-f", o.Dir+"/").Output(); len(out) > 0 {
		t.Errorf("processes of the cluster left after stopping: %s", out)
	}
	if data, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(data), o.Dir+"/") {
		t.Errorf("mounts left under %s after stopping", o.Dir)
	}
	for _, name := range o.Nodes {
		if _, err := os.Stat("/run/netns/" + name); err == nil {
			t.Errorf("the network namespace of %s is left after stopping", name)
		}
	}
}

// Pods scheduled onto both nodes run the local images, and a pod on one
// node reaches a Service whose pod is on the other.
func TestPodsReachAServiceAcrossNodes(t *testing.T) {
	c := startCluster(t)
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := testenv.Namespace(t, cl, "net")
	// The controller manager gives each namespace its default account,
	// which the ServiceAccount admission wants before any pod.
	testenv.Eventually(t, time.Minute, func() error {
		return cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	})
	server := examplePod(ns, "server", "test-a", "serve", "/tmp")
	server.Labels = map[string]string{"app": "server"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: server.Labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	for _, obj := range []client.Object{server, svc} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	get := examplePod(ns, "client", "test-b", "get", fmt.Sprintf("http://%s/", svc.Spec.ClusterIP))
	get.Spec.RestartPolicy = corev1.RestartPolicyNever
	if err := cl.Create(ctx, get); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() error { return podSucceeded(ctx, cl, get) })
	logs := podLogs(t, c, get)
	if !strings.Contains(logs, "/tmp: written by server") {
		t.Fatalf("the client on test-b read %q through Service %s, want the server's file from test-a", logs, svc.Spec.ClusterIP)
	}
}

// Each fault takes one node out, as its kind of failure would, while the
// other stays Ready, and the node comes back Ready when the fault ends.
func TestNodeFaults(t *testing.T) {
	c := startCluster(t)
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	other, node := c.Nodes[0], c.Nodes[1]
	faults := []struct {
		name        string
		inject, end func() error
	}{
		{"power loss", node.Stop, func() error { return node.Start(context.Background()) }},
		{"hang", node.Freeze, node.Thaw},
		{"partition", node.Cut, node.Mend},
	}
	for _, f := range faults {
		if err := f.inject(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		// The controller manager marks a node it has not heard from
		// Unknown after its grace period (20 s here).
		testenv.Eventually(t, 2*time.Minute, func() error { return nodeReady(cl, node.Name(), corev1.ConditionUnknown) })
		if err := nodeReady(cl, other.Name(), corev1.ConditionTrue); err != nil {
			t.Fatalf("%s of %s: %v", f.name, node.Name(), err)
		}
		if err := f.end(); err != nil {
			t.Fatalf("ending %s: %v", f.name, err)
		}
		testenv.Eventually(t, 2*time.Minute, func() error { return nodeReady(cl, node.Name(), corev1.ConditionTrue) })
	}
}

func examplePod(ns, name, node string, args ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: node},
		Containers: []corev1.Container{{Name: "app", Image: exampleAppRef, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: args}},
	}}
}

func podSucceeded(ctx context.Context, cl client.Client, pod *corev1.Pod) error {
	if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		return fmt.Errorf("pod %s is %s: %v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	return nil
}

func nodeReady(cl client.Client, name string, want corev1.ConditionStatus) error {
	node := &corev1.Node{}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == want {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready=%s: %v", name, want, node.Status.Conditions)
}

func podLogs(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	data, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
