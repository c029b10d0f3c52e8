// Package release installs strata into the local cluster the way a user
// does, with Helm and charts/strata, from images built on this machine:
// strata's own, the CSI sidecars (hack/sidecars.sh), the pause image and
// the example app. `strata up` and the end-to-end suite use it.
package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/images"
)

// Registry is the registry part of every local image reference; nothing
// is ever pulled from it.
const Registry = "strata.local"

// Sidecars are the CSI sidecars the chart runs, by their binary in
// bin/sidecars, with the tags the chart's values name.
var Sidecars = []struct{ Name, Tag, Value string }{
	{"csi-provisioner", "v6.4.0", "provisioner"},
	{"csi-attacher", "v4.13.0", "attacher"},
	{"csi-snapshotter", "v8.7.0", "snapshotter"},
	{"snapshot-controller", "v8.7.0", "snapshotController"},
}

// Images are every image the local cluster runs: the pause image, the
// example app, strata, and the sidecars, from binaries under bin.
func Images(bin string) ([]images.Image, error) {
	strata, err := images.Strata(filepath.Join(bin, "strata"))
	if err != nil {
		return nil, err
	}
	out := []images.Image{images.Pause(bin), images.ExampleApp(bin), strata}
	for _, s := range Sidecars {
		path := filepath.Join(bin, "sidecars", s.Name)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s is not built: run hack/sidecars.sh", path)
		}
		out = append(out, images.Image{Ref: fmt.Sprintf("%s/%s:%s", Registry, s.Name, s.Tag),
			Entrypoint: []string{"/" + s.Name}, Files: []images.File{{Path: "/" + s.Name, Source: path, Mode: 0o755}}})
	}
	return out, nil
}

// Options describe the release.
type Options struct {
	// Chart is charts/strata; Helm is bin/helm.
	Chart, Helm string
	// Kubeconfig is an administrator's kubeconfig file.
	Kubeconfig string
	Namespace  string
	// Set are more values, key=value.
	Set []string
	// Objects are made in Namespace before the chart is installed, such
	// as the Secrets its values name; ones that exist are kept.
	Objects []client.Object
}

// Values are the chart values of the local cluster: the local images,
// the loopback volume manager (this machine's kernel may lack
// device-mapper, and the manager is named, never fallen back to), the
// LVM mover, and the snapshot controller.
func Values() []string {
	v := []string{
		"image.repository=" + Registry + "/strata", "image.tag=local", "image.pullPolicy=IfNotPresent",
		"csiSidecars.registry=" + Registry,
		"agent.backend=loopback",
		"agent.replication.enabled=true",
		"snapshotController.enabled=true",
	}
	for _, s := range Sidecars {
		v = append(v, fmt.Sprintf("csiSidecars.%s.name=%s", s.Value, s.Name), fmt.Sprintf("csiSidecars.%s.tag=%s", s.Value, s.Tag))
	}
	return v
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

// Install installs or upgrades the release and waits until its
// Deployments and DaemonSets are available.
func Install(ctx context.Context, c client.Client, o Options, timeout time.Duration) error {
	if err := prepare(ctx, c, o); err != nil {
		return err
	}
	args := []string{"upgrade", "--install", "strata", o.Chart, "--kubeconfig", o.Kubeconfig,
		"--namespace", o.Namespace, "--create-namespace"}
	for _, s := range append(Values(), o.Set...) {
		args = append(args, "--set", s)
	}
	if out, err := exec.CommandContext(ctx, o.Helm, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("helm %s: %v: %s", strings.Join(args[:3], " "), err, out)
	}
	return waitAvailable(ctx, c, o.Namespace, timeout)
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
// has all its pods ready.
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
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < d.Status.Replicas || d.Status.AvailableReplicas == 0 {
			pending = append(pending, "Deployment/"+d.Name)
		}
	}
	daemonsets := &appsv1.DaemonSetList{}
	if err := c.List(ctx, daemonsets, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for _, d := range daemonsets.Items {
		if d.Status.DesiredNumberScheduled == 0 || d.Status.NumberAvailable < d.Status.DesiredNumberScheduled {
			pending = append(pending, "DaemonSet/"+d.Name)
		}
	}
	return pending, nil
}
