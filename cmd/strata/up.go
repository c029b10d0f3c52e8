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
	o := up.Options{
		StateDir:   ".strata",
		ClusterDir: "clusters/homelab",
		CRDDir:     "charts/strata/crds",
		AssetsDir:  filepath.Join("bin", "k8s"),
		GitAddr:    "127.0.0.1:8480",
		HookAddr:   "127.0.0.1:9292",
		// The volume API's usual port; NFS off its usual 2049, which a
		// kernel NFS server may hold.
		VolumeAPIAddr: "127.0.0.1:8420",
		NFSAddr:       "127.0.0.1:12049",
	}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run strata locally: control plane, git server, controller and the example repository",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(logr.Discard())
			o.Out = cmd.OutOrStdout()
			for _, p := range []*string{&o.StateDir, &o.ClusterDir, &o.CRDDir, &o.AssetsDir} {
				abs, err := filepath.Abs(*p)
				if err != nil {
					return err
				}
				*p = abs
			}
			if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
				return err
			}
			return up.Run(ctrl.SetupSignalHandler(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.StateDir, "state-dir", o.StateDir, "where etcd data, the git repository and artifacts are kept between runs")
	f.StringVar(&o.ClusterDir, "cluster-dir", o.ClusterDir, "directory that seeds the git repository on first run")
	f.StringVar(&o.CRDDir, "crds", o.CRDDir, "CRDs to install")
	f.StringVar(&o.AssetsDir, "control-plane-dir", o.AssetsDir, "directory holding kube-apiserver and etcd")
	f.StringVar(&o.GitAddr, "git-address", o.GitAddr, "loopback address the git repository is served on")
	f.StringVar(&o.HookAddr, "receiver-address", o.HookAddr, "loopback address of the webhook receiver")
	f.StringVar(&o.VolumeAPIAddr, "volume-api-address", o.VolumeAPIAddr, "loopback address of the btrfs storage host's volume API")
	f.StringVar(&o.NFSAddr, "nfs-address", o.NFSAddr, "loopback address of the btrfs storage host's NFS-Ganesha")
	return cmd
}
