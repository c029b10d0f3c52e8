package nodecmd

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/cmd/internal/cli"
	"github.com/strata-gitops/strata/storage/csi"
)

// CSI runs the CSI driver's services; version is the driver's.
func CSI(version string) *cobra.Command {
	o := csi.Defaults()
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "csi",
		Short: "Run the CSI driver " + csi.DriverName + " (--mode controller once per cluster, --mode node on every node)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(cli.NewLogger())
			o.Version = version
			// The node service reads pods' fsGroupChangePolicy through the
			// API when it can; the controller service cannot do without it.
			cfg, err := cli.RestConfig(kubeconfig)
			if err != nil && o.Mode == "controller" {
				return err
			}
			if err != nil {
				ctrl.Log.Info("no Kubernetes API for the node service: pods' fsGroupChangePolicy is taken as Always; give it a kubeconfig (--kubeconfig) or run it in-cluster to honour OnRootMismatch", "error", err.Error())
				cfg = nil
			}
			return csi.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Mode, "mode", o.Mode, "which CSI service to serve besides Identity: controller or node")
	f.StringVar(&o.Endpoint, "endpoint", o.Endpoint, "unix socket to serve on, as unix:///path or /path")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (controller mode; node mode reads pods' fsGroupChangePolicy with it); in-cluster configuration when empty")
	f.BoolVar(&o.Expand, "expand", o.Expand, "controller mode: grow volumes whose claims ask for more (the work of external-resizer, which strata needs no sidecar for)")
	f.DurationVar(&o.Wait, "agent-wait", o.Wait, "controller mode: how long a call waits for a node's agent before the CO is told to retry")
	f.StringVar(&o.NodeName, "node-name", o.NodeName, "node mode: this node's name (default: $NODE_NAME)")
	f.StringVar(&o.NodeIP, "node-ip", o.NodeIP, "node mode: this node's IP, part of the node ID (default: $NODE_IP)")
	f.StringVar(&o.BtrfsBase, "btrfs-base", o.BtrfsBase, "node mode: the btrfs volume agent's --btrfs-base on this node, if one runs here; only volumes under it are bind-mounted directly, the rest go over NFS")
	f.StringVar(&o.AgentSocket, "agent-socket", o.AgentSocket, "node mode: the local API socket of this node's strata agent")
	f.StringVar(&o.RegistrationDir, "registration-dir", o.RegistrationDir,
		"node mode: the kubelet's plugins_registry directory, to register the driver with the kubelet (the work of node-driver-registrar); empty: no registration")
	f.StringVar(&o.KubeletEndpoint, "kubelet-endpoint", o.KubeletEndpoint,
		"node mode: this service's socket as the kubelet sees it, e.g. /var/lib/kubelet/plugins/strata.csi.strata.dev/csi.sock")
	return cmd
}
