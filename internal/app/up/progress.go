package up

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/cluster"
)

// watchProgress prints each Kustomization's state whenever it changes and
// returns once there are Kustomizations besides the root and all are Ready.
func watchProgress(ctx context.Context, c client.Client, out io.Writer) error {
	seen := map[string]string{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		list := &kustomizev1.KustomizationList{}
		if err := c.List(ctx, list); err != nil {
			return err
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		ready := 0
		for _, ks := range list.Items {
			state, msg := describe(&ks)
			if state == "Ready" {
				ready++
			}
			line := state + ": " + msg
			if seen[ks.Name] != line {
				seen[ks.Name] = line
				fmt.Fprintf(out, "  %-28s %s\n", ks.Namespace+"/"+ks.Name, line)
			}
		}
		if len(list.Items) > 1 && ready == len(list.Items) {
			fmt.Fprintf(out, "► all %d Kustomizations are Ready\n", ready)
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func describe(ks *kustomizev1.Kustomization) (string, string) {
	c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	switch {
	case c == nil:
		return "Pending", "waiting for the controller"
	case c.Status == metav1.ConditionTrue && c.ObservedGeneration == ks.Generation:
		return "Ready", c.Message
	case c.Status == metav1.ConditionUnknown:
		return "Progressing", c.Message
	default:
		return "Not ready", c.Message
	}
}

// waitWorkloads prints each claim's phase and each Deployment the
// Kustomizations applied as they change, and returns once every claim is
// Bound and every such Deployment has its replicas ready with containers
// started since this run began. A Deployment's own status is not enough:
// on a second run it still says ready from the last one until the
// restarted kubelets report, and the app's pods are not serving yet.
func waitWorkloads(ctx context.Context, c client.Client, out io.Writer, since time.Time) error {
	seen := map[string]string{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		states, done, err := workloadStates(ctx, c, since)
		if err != nil {
			return err
		}
		for _, s := range states {
			if seen[s.name] != s.state {
				seen[s.name] = s.state
				fmt.Fprintf(out, "  %-40s %s\n", s.name, s.state)
			}
		}
		if done {
			fmt.Fprintf(out, "► every claim is Bound and every app is ready\n")
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

type workloadState struct{ name, state string }

func workloadStates(ctx context.Context, c client.Client, since time.Time) ([]workloadState, bool, error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, claims); err != nil {
		return nil, false, err
	}
	deployments := &appsv1.DeploymentList{}
	if err := c.List(ctx, deployments, client.HasLabels{kustomizev1.GroupVersion.Group + "/name"}); err != nil {
		return nil, false, err
	}
	// One list of pods a poll, matched to each Deployment here, rather
	// than a list per Deployment.
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return nil, false, err
	}
	var states []workloadState
	done := len(deployments.Items) > 0
	for _, pvc := range claims.Items {
		state := string(pvc.Status.Phase)
		if pvc.Status.Phase == corev1.ClaimBound {
			state += " to " + pvc.Spec.VolumeName
		}
		states = append(states, workloadState{"claim " + pvc.Namespace + "/" + pvc.Name, state})
		done = done && pvc.Status.Phase == corev1.ClaimBound
	}
	for _, d := range deployments.Items {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		ready, waiting, err := podsReadySince(pods.Items, &d, since)
		if err != nil {
			return nil, false, err
		}
		state := fmt.Sprintf("%d/%d ready", ready, want)
		if ready < want && waiting != "" {
			state += " (" + waiting + ")"
		}
		states = append(states, workloadState{"deployment " + d.Namespace + "/" + d.Name, state})
		done = done && d.Status.ObservedGeneration >= d.Generation && ready >= want && d.Status.UpdatedReplicas >= want
	}
	sort.Slice(states, func(i, j int) bool { return states[i].name < states[j].name })
	return states, done, nil
}

// podsReadySince counts, among pods, the Deployment's that are Ready and
// whose containers all started at or after since, and says what the
// first of the others waits for: a claim Pending with a
// WaitForFirstConsumer class shows nothing itself, its pod says why.
func podsReadySince(pods []corev1.Pod, d *appsv1.Deployment, since time.Time) (ready int32, waiting string, err error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return 0, "", fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	// The API keeps start times in whole seconds.
	since = since.Truncate(time.Second)
	for i := range pods {
		p := &pods[i]
		if p.Namespace != d.Namespace || !selector.Matches(labels.Set(p.Labels)) || p.DeletionTimestamp != nil {
			continue
		}
		if podutils.IsPodReady(p) && startedSince(p, since) {
			ready++
		} else if waiting == "" {
			waiting = waitsFor(p)
		}
	}
	return ready, waiting, nil
}

// waitsFor says why a pod is not running yet, as the scheduler or kubelet
// put it: unschedulable, or a container waiting; empty when neither says.
func waitsFor(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return "pod " + p.Name + ": " + c.Message
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return fmt.Sprintf("pod %s: %s %s", p.Name, w.Reason, w.Message)
		}
	}
	return ""
}

func startedSince(p *corev1.Pod, since time.Time) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil || s.State.Running.StartedAt.Time.Before(since) {
			return false
		}
	}
	return true
}

// kubectlFor is kubectl with the cluster's administrator kubeconfig.
func kubectlFor(o Options, c *cluster.Cluster) []string {
	return []string{filepath.Join(o.Bin, "k8s", "kubectl"), "--kubeconfig", c.KubeconfigPath()}
}

// show runs kubectl and prints its output, or why it failed.
func show(out io.Writer, kubectl []string, args ...string) {
	cmd := exec.Command(kubectl[0], append(kubectl[1:], args...)...) //nolint:gosec // our own kubectl
	data, err := cmd.CombinedOutput()
	fmt.Fprint(out, string(data))
	if err != nil {
		fmt.Fprintf(out, "  (kubectl %v: %v)\n", args, err)
	}
}

func printNextSteps(out io.Writer, work, kubeconfig, kubectlDir, dashboard string) {
	fmt.Fprintf(out, `
Everything in Git is applied, every claim is Bound and every app runs.
The dashboard (nodes, pools, volumes, pairs, failovers, Buildbarn, the Kustomization graph):
  %[4]s
Use the cluster with:
  export KUBECONFIG=%[2]s PATH=%[3]s:$PATH
  kubectl get pods -A -o wide -w        # which pod runs on which node
  kubectl get pvc -A                    # the claims and their volumes
The example app wrote a file into each of its volumes (one LVM, one btrfs);
restart it and it reads the first pod's files back:
  kubectl -n apps rollout restart deployment/example-app
  kubectl -n apps logs deployment/example-app
To change the cluster, push to Git:
  cd %[1]s
  $EDITOR apps/app.yaml                 # e.g. change a replica count or a ConfigMap value
  git commit -am "my change" && git push
The push calls the Receiver and the change lands within seconds. Watch it with:
  kubectl get kustomizations -A -w
  flux get ks                           # the flux CLI works against strata too
docs/development.md ("The local cluster") shows how to stop, freeze or cut off a node.
Press Ctrl-C to stop; run 'make up' again to resume with the same state.
`, work, kubeconfig, kubectlDir, dashboard)
}
