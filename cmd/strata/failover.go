package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/cmd/internal/cli"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/internal/scheme"
)

func failoverCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "failover", Short: "Act on Failovers (docs/failover.md)"}
	cmd.AddCommand(failoverBackCommand())
	return cmd
}

// failoverBackCommand asks for a failback, as the annotation does: the
// controller moves the app back once the primary node is back.
func failoverBackCommand() *cobra.Command {
	var kubeconfig, namespace string
	cmd := &cobra.Command{
		Use:   "back NAME",
		Short: "Move a failed-over app back to its primary once the primary node is back",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cli.RestConfig(kubeconfig)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return err
			}
			fo := &failoverv1alpha1.Failover{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: namespace, Name: args[0]}, fo); err != nil {
				return fmt.Errorf("failover %s/%s: %w", namespace, args[0], err)
			}
			if fo.Status.Active != failoverv1alpha1.ActiveBackup {
				return fmt.Errorf("failover %s/%s runs on its primary (phase %s): there is nothing to move back", namespace, args[0], fo.Status.Phase)
			}
			patch := client.MergeFrom(fo.DeepCopy())
			if fo.Annotations == nil {
				fo.Annotations = map[string]string{}
			}
			fo.Annotations[controller.AnnotationFailback] = "true"
			if err := c.Patch(cmd.Context(), fo, patch); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Failover %s/%s: failback asked for; it starts once node %s's agent renews its Lease (watch: kubectl -n %s get fo %s -w)\n",
				namespace, args[0], fo.Spec.Primary.Node, namespace, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; $KUBECONFIG or in-cluster when empty")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the Failover's namespace")
	return cmd
}
