// Command bbbench measures the Buildbarn controllers: N installations of
// five components each (a two-shard storage, a scheduler, a frontend, a
// browser and a worker), created at once on a fresh local control plane,
// until every component is Ready; it prints the time and the
// controller's peak resident memory.
//
// No kubelet runs pods here, so a stand-in for the Deployment and
// StatefulSet controllers marks each workload rolled out as soon as it is
// written (its status, as those controllers would write it once the pods
// were ready). What is measured is strata's part: reading the
// installation, generating the configuration, applying the objects and
// writing status, for every component, again whenever its installation
// changes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/benchenv"
	"github.com/strata-gitops/strata/internal/testing/benchstat"
)

func main() {
	installs := flag.Int("installations", 50, "Buildbarn installations, five components each")
	strata := flag.String("strata", "bin/strata", "the strata binary")
	limit := flag.Duration("limit", 10*time.Minute, "how long to wait for every component to be Ready")
	flag.Parse()
	if err := run(*installs, *strata, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "bbbench:", err)
		os.Exit(1)
	}
}

func run(installs int, strata string, limit time.Duration) error {
	dir, err := os.MkdirTemp("", "strata-bbbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// envtest's default service range holds only ~250 Services.
	env, err := benchenv.Start(dir, map[string]string{"service-cluster-ip-range": "10.96.0.0/12"})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, kcPath := env.Client, env.Kubeconfig
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rollOutWorkloads(ctx, c)

	ctl := exec.Command(strata, "controller", "--kubeconfig", kcPath, "--artifact-dir", filepath.Join(dir, "artifacts"),
		"--artifact-bind-address", "0", "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--receiver-bind-address", "0")
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	ctl.Stdout, ctl.Stderr = logFile, logFile
	if err := ctl.Start(); err != nil {
		return err
	}
	defer func() { _ = ctl.Process.Signal(os.Interrupt); _ = ctl.Wait() }()

	start := time.Now()
	for i := range installs {
		if err := createInstallation(ctx, c, fmt.Sprintf("bb-%03d", i)); err != nil {
			return err
		}
	}
	created := time.Since(start)
	if err := waitAllReady(ctx, c, installs*5, limit); err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Printf("buildbarn: %d installations (%d components) created in %.1f s, all Ready %.1f s after the first create; controller peak RSS %d MiB\n",
		installs, installs*5, created.Seconds(), elapsed.Seconds(), benchstat.PeakRSS(ctl.Process.Pid)>>20)
	return nil
}

// createInstallation makes one namespace's five components.
func createInstallation(ctx context.Context, c client.Client, ns string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	spec := func(replicas int32, image string) bbv1.ComponentSpec {
		return bbv1.ComponentSpec{Release: "20240310T090416Z-28dbdbb", Image: "mirror.test/buildbarn/" + image, Replicas: ptr.To(replicas)}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	for _, obj := range []client.Object{
		&bbv1.BuildbarnStorage{ObjectMeta: meta("storage"), Spec: bbv1.BuildbarnStorageSpec{ComponentSpec: spec(2, "bb-storage")}},
		&bbv1.BuildbarnScheduler{ObjectMeta: meta("scheduler"), Spec: bbv1.BuildbarnSchedulerSpec{ComponentSpec: spec(1, "bb-scheduler")}},
		&bbv1.BuildbarnFrontend{ObjectMeta: meta("frontend"), Spec: bbv1.BuildbarnFrontendSpec{ComponentSpec: spec(1, "bb-storage")}},
		&bbv1.BuildbarnBrowser{ObjectMeta: meta("browser"), Spec: bbv1.BuildbarnBrowserSpec{ComponentSpec: spec(1, "bb-browser")}},
		&bbv1.BuildbarnWorker{ObjectMeta: meta("worker"), Spec: bbv1.BuildbarnWorkerSpec{ComponentSpec: spec(1, "bb-worker"),
			WorkerExtras: bbv1.WorkerExtras{RunnerImage: "mirror.test/ubuntu:22.04", RunnerInstallerImage: "mirror.test/buildbarn/bb-runner-installer", Concurrency: 4}}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s/%s: %w", ns, obj.GetName(), err)
		}
	}
	return nil
}

// rollOutWorkloads stands in for the Deployment and StatefulSet
// controllers and the kubelets: every workload not rolled out is given
// the status of one whose pods are all updated and ready.
func rollOutWorkloads(ctx context.Context, c client.Client) {
	for ctx.Err() == nil {
		deployments := &appsv1.DeploymentList{}
		if err := c.List(ctx, deployments); err == nil {
			for i := range deployments.Items {
				d := &deployments.Items[i]
				n := *d.Spec.Replicas
				if d.Status.ObservedGeneration != d.Generation || d.Status.ReadyReplicas != n {
					d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
					_ = c.Status().Update(ctx, d)
				}
			}
		}
		sets := &appsv1.StatefulSetList{}
		if err := c.List(ctx, sets); err == nil {
			for i := range sets.Items {
				s := &sets.Items[i]
				n := *s.Spec.Replicas
				if s.Status.ObservedGeneration != s.Generation || s.Status.ReadyReplicas != n {
					s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: n, UpdatedReplicas: n, CurrentReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
					_ = c.Status().Update(ctx, s)
				}
			}
		}
		time.Sleep(100 * time.Millisecond) // a poll interval, not synchronisation
	}
}

// waitAllReady polls until want components are Ready at their current
// generation.
func waitAllReady(ctx context.Context, c client.Client, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	lists := []client.ObjectList{&bbv1.BuildbarnStorageList{}, &bbv1.BuildbarnSchedulerList{}, &bbv1.BuildbarnFrontendList{},
		&bbv1.BuildbarnBrowserList{}, &bbv1.BuildbarnWorkerList{}}
	ready, waiting := 0, ""
	for time.Now().Before(deadline) {
		ready = 0
		for _, l := range lists {
			if err := c.List(ctx, l); err != nil {
				return err
			}
			n, w := countReady(l)
			ready += n
			if w != "" {
				waiting = w
			}
		}
		if ready == want {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%d of %d components Ready after %s; e.g. %s", ready, want, limit, waiting)
}

// countReady counts the Ready components and describes one that is not.
func countReady(list client.ObjectList) (int, string) {
	objs, _ := apimeta.ExtractList(list)
	n, waiting := 0, ""
	for _, o := range objs {
		c := o.(bbv1.Component)
		if s := c.GetStatus(); s.State == bbv1.StateReady && s.ObservedGeneration == c.GetGeneration() {
			n++
		} else {
			waiting = fmt.Sprintf("%T %s/%s: %s %v", o, c.GetNamespace(), c.GetName(), s.State, s.Conditions)
		}
	}
	return n, waiting
}
