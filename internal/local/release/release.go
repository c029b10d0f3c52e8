// Package release builds strata's release from the source tree (with
// hack/release, as `make release` does), pushes it to the local cluster's
// registry, and installs it the way a user does: `helm upgrade --install`
// of the chart from the registry (with Helm's SDK, the CLI's library),
// every image pulled by digest. `strata up` and
// the end-to-end suite use it.
package release

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options describe the installation.
type Options struct {
	// Release is what is installed, from Registry (HOST:PORT), which the
	// nodes know as RegistryName.
	Release                *Built
	Registry, RegistryName string
	// Kubectl is bin/k8s/kubectl. The chart is installed with Helm's SDK
	// (helm.go): there is no helm program to build.
	Kubectl string
	// Kubeconfig is an administrator's kubeconfig file.
	Kubeconfig string
	Namespace  string
	// Set are more values, key=value.
	Set []string
	// Objects are made in Namespace before the chart is installed, such
	// as the Secrets its values name; ones that exist are kept.
	Objects []client.Object
	// Progress, if set, hears each step of Install as it ends: "pushed",
	// "CRDs applied", "chart installed", "available".
	Progress func(step string)
}

// Values are the chart values of the local cluster: where the registry
// is (the chart names every image's tag and digest itself), the loopback
// volume manager (this machine's kernel may lack device-mapper, and the
// manager is named, never fallen back to), the LVM mover, the snapshot
// controller, and the claims' usage read as often as the local kubelets
// measure it.
func Values(registryName string) []string {
	return []string{
		"image.repository=" + registryName + "/" + ImagePrefix + "/strata",
		"csiSidecars.registry=" + registryName + "/" + ImagePrefix,
		"agent.backend=loopback",
		"agent.replication.enabled=true",
		"snapshotController.enabled=true",
		"dashboard.volumeUsage.interval=10s",
	}
}

// ControllersOn are the chart values that run strata's controller and
// its CSI controller on node: failover needs them on a node other than
// the primary it watches, as on a control-plane node in a real cluster
// (docs/failover.md), or they would be lost with it.
func ControllersOn(node string) []string {
	return []string{
		`controller.nodeSelector.kubernetes\.io/hostname=` + node,
		`csi.nodeSelector.kubernetes\.io/hostname=` + node,
	}
}

// Install pushes the release to the registry, installs or upgrades it
// from there and waits until its Deployments and DaemonSets are
// available. An upgrade applies the release's CRDs first, as
// docs/install.md tells users to: Helm leaves them alone.
func Install(ctx context.Context, c client.Client, o Options, timeout time.Duration) error {
	progress := func(step string) {
		if o.Progress != nil {
			o.Progress(step)
		}
	}
	if err := o.Release.Push(ctx, o.Registry); err != nil {
		return err
	}
	progress("pushed")
	if err := prepare(ctx, c, o); err != nil {
		return err
	}
	h, err := pullChart(o)
	if err != nil {
		return err
	}
	if err := applyCRDs(ctx, o, h.crds()); err != nil {
		return err
	}
	progress("CRDs applied")
	if err := h.upgradeInstall(ctx, o, append(Values(o.RegistryName), o.Set...)); err != nil {
		return err
	}
	progress("chart installed")
	if err := waitAvailable(ctx, c, o.Namespace, timeout); err != nil {
		return err
	}
	progress("available")
	return nil
}

// chartRef is the release's chart in the registry.
func chartRef(o Options) string { return "oci://" + o.Registry + "/charts/strata" }

// applyCRDs applies the release's CRDs server-side, as docs/install.md
// says (`helm show crds` of the chart into `kubectl apply --server-side`):
// Helm installs CRDs only once and never upgrades them.
func applyCRDs(ctx context.Context, o Options, crds []byte) error {
	apply := exec.CommandContext(ctx, o.Kubectl, "--kubeconfig", o.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-")
	apply.Stdin = bytes.NewReader(crds)
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply --server-side of the release's CRDs: %w: %s", err, out)
	}
	return nil
}

// prepare makes the release namespace and o.Objects in it.
func prepare(ctx context.Context, c client.Client, o Options) error {
	objects := append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}}, o.Objects...)
	for _, obj := range objects {
		if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// waitAvailable waits until every Deployment and DaemonSet in namespace
// has all its pods ready and of its newest template: after an upgrade,
// until the rollout is done.
func waitAvailable(ctx context.Context, c client.Client, namespace string, timeout time.Duration) error {
	var pending []string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pending, last = notAvailable(ctx, c, namespace)
		return last == nil && len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("strata's workloads %v not available after %s (%v)", pending, timeout, last)
	}
	return nil
}

func notAvailable(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var pending []string
	deployments := &appsv1.DeploymentList{}
	if err := c.List(ctx, deployments, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for _, d := range deployments.Items {
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < d.Status.Replicas || d.Status.AvailableReplicas == 0 ||
			d.Status.UpdatedReplicas < d.Status.Replicas || d.Status.Replicas > ptr.Deref(d.Spec.Replicas, 1) {
			pending = append(pending, "Deployment/"+d.Name)
		}
	}
	daemonsets := &appsv1.DaemonSetList{}
	if err := c.List(ctx, daemonsets, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for _, d := range daemonsets.Items {
		if d.Status.ObservedGeneration < d.Generation || d.Status.DesiredNumberScheduled == 0 ||
			d.Status.NumberAvailable < d.Status.DesiredNumberScheduled || d.Status.UpdatedNumberScheduled < d.Status.DesiredNumberScheduled {
			pending = append(pending, "DaemonSet/"+d.Name)
		}
	}
	return pending, nil
}
