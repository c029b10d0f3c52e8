package main

import (
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/app/up"
)

func upCommand() *cobra.Command {
	root, _ := os.Getwd()
	o := up.Defaults(root)
	releaseOnly := false
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run strata locally: a two-node cluster, strata installed with its chart, a git server and the example repository",
		Long: `up runs a real, small Kubernetes cluster on this machine (root needed): kube-apiserver,
etcd, the controller manager and the scheduler, and two nodes, each a kubelet with its own
containerd, network namespace and loop-device disks. It installs strata with charts/strata from
images built here, serves the example repository over git, and bootstraps it like Flux.
Run it from strata's source tree (make up); the state is kept for the next run.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(logr.Discard())
			o.Out = cmd.OutOrStdout()
			for _, p := range []*string{&o.StateDir, &o.ClusterDir, &o.Root, &o.Bin} {
				abs, err := filepath.Abs(*p)
				if err != nil {
					return err
				}
				*p = abs
			}
			o.Cluster.Bin = filepath.Join(o.Bin, "k8s")
			if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
				return err
			}
			if releaseOnly {
				return up.BuildRelease(ctrl.SetupSignalHandler(), o)
			}
			return up.Run(ctrl.SetupSignalHandler(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.StateDir, "state-dir", o.StateDir, "where the cluster, the git repository and its work tree are kept between runs")
	f.StringVar(&o.ClusterDir, "cluster-dir", o.ClusterDir, "directory that seeds the git repository on first run")
	f.StringVar(&o.Root, "source-dir", o.Root, "strata's source tree: its release is built from it (hack/release), and the example repository copied")
	f.StringVar(&o.Bin, "bin-dir", o.Bin, "the built binaries: strata, k8s/, sidecars/, helm")
	f.IntVar(&o.GitPort, "git-port", o.GitPort, "port of the git server, on the host's address on the nodes' network")
	f.BoolVar(&releaseOnly, "release-only", false, "build the local release of the source tree and stop (make up's build plan runs this beside the Kubernetes builds)")
	f.IntVar(&o.DashboardPort, "dashboard-port", o.DashboardPort, "port on 127.0.0.1 forwarded to the controller's dashboard (0: any free one)")
	return cmd
}
