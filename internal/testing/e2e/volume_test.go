package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A claim of a WaitForFirstConsumer class is provisioned on the node its
// pod is scheduled to; what the pod writes is there for the next pod.
func TestDataOutlivesThePod(t *testing.T) {
	a := runApp(t, "keep")
	cl, claim, pod, first, ns, ctx := a.client, a.claim, a.pod, a.wrote, a.ns, context.Background()
	if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := cl.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if node := volumeNode(pv); node != pod.Spec.NodeName {
		t.Fatalf("volume %s is on node %q, its pod on %s", pv.Name, node, pod.Spec.NodeName)
	}
	if err := cl.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error { return gone(ctx, cl, pod) })
	again := appPod(ns, "app", claim.Name)
	if err := cl.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if second := waitServing(t, again); second != first {
		t.Fatalf("the second pod read %q, the first wrote %q", second, first)
	}
}

// app is the example app running on a fresh 1Gi claim of its own
// namespace, and the line it read from its volume.
type app struct {
	ns          string
	claim       *corev1.PersistentVolumeClaim
	pod         *corev1.Pod
	wrote       string
	client      client.Client
	clusterNode func() *kubenode.Node
}

// runApp starts the example app in a namespace named for the test.
func runApp(t *testing.T, name string) app {
	t.Helper()
	c, cl := start(t)
	ns := namespaceFor(t, cl, name)
	claim := newClaim(ns, "data", "1Gi")
	pod := appPod(ns, "app", claim.Name)
	create(t, cl, claim, pod)
	a := app{ns: ns, claim: claim, pod: pod, client: cl}
	a.wrote = waitServing(t, pod)
	a.clusterNode = func() *kubenode.Node {
		for _, n := range c.Nodes {
			if n.Name() == pod.Spec.NodeName {
				return n
			}
		}
		return nil
	}
	return a
}

func newClaim(ns, name, size string) *corev1.PersistentVolumeClaim {
	class := storagev1alpha1.StorageClassName("fast")
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}}
}

// namespaceFor makes a namespace for one test and waits for its default
// service account, which pods need.
func namespaceFor(t testing.TB, cl client.Client, name string) string {
	t.Helper()
	ns := testenv.Namespace(t, cl, name)
	testenv.Eventually(t, time.Minute, func() error {
		return cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns
}

// waitServing waits until the example app runs and returns what it read
// from its volume, from its log.
func waitServing(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	cl, ctx := stack.client, context.Background()
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s/%s is %s: %v %v", pod.Namespace, pod.Name, pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
		}
		return nil
	})
	var line string
	testenv.Eventually(t, time.Minute, func() error {
		logs, err := podLogs(pod)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(logs, "\n") {
			if strings.HasPrefix(l, "/data: ") {
				line = l
				return nil
			}
		}
		return fmt.Errorf("pod %s has not read its volume yet: %q", pod.Name, logs)
	})
	return line
}

func podLogs(pod *corev1.Pod) (string, error) { return podLogsIn(stack.cluster.Config, pod) }

// podLogsIn reads a pod's log from the cluster at cfg.
func podLogsIn(cfg *rest.Config, pod *corev1.Pod) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	data, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	return string(data), err
}

func gone(ctx context.Context, cl client.Client, obj client.Object) error {
	err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if err == nil {
		return fmt.Errorf("%s %s is still there", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
	return client.IgnoreNotFound(err)
}

// volumeNode is the node a volume's affinity names.
func volumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// What a pod wrote is there after its node loses power and comes back:
// the kubelet starts the pod again on the same volume.
func TestDataSurvivesANodeReboot(t *testing.T) {
	a := runApp(t, "reboot")
	cl, pod, first, node, ctx := a.client, a.pod, a.wrote, a.clusterNode(), context.Background()
	if err := node.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.RestartCount > 0 && s.Ready {
				return nil
			}
		}
		return fmt.Errorf("pod %s has not run again since its node came back: %v", pod.Name, pod.Status.ContainerStatuses)
	})
	logs, err := podLogs(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, first) {
		t.Fatalf("after the reboot the pod read %q, before it %q", logs, first)
	}
}
