package up

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

func printNextSteps(out io.Writer, work, kubeconfig string) {
	fmt.Fprintf(out, `
Everything in Git is applied. To change the cluster, push to Git:

  cd %[1]s
  $EDITOR apps/app.yaml                 # e.g. change a replica count or a ConfigMap value
  git commit -am "my change" && git push

The push calls the Receiver and the change lands within a second. Watch it with:

  kubectl --kubeconfig %[2]s get kustomizations -A -w
  flux --kubeconfig %[2]s get ks          # the flux CLI works against strata too

Volumes come from the LVMCluster in Git through the CSI driver (sockets above); csi-sanity
exercises every call against them:

  bin/csi-sanity -csi.endpoint unix://%[3]s/csi-node.sock -csi.controllerendpoint unix://%[3]s/csi-controller.sock

Press Ctrl-C to stop; run 'make up' again to resume with the same state.
`, work, kubeconfig, filepath.Dir(kubeconfig))
}
