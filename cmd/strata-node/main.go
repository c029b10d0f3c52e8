// Command strata-node is what every node runs and pulls: the storage
// agent, the CSI driver's services and the image jobs' client, without
// the controller, the plan (Helm's SDK) or SOPS (cloud key services),
// which only cmd/strata links.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/strata-gitops/strata/cmd/internal/cli"
	"github.com/strata-gitops/strata/cmd/internal/nodecmd"
)

// version is set at link time (the release).
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "strata-node",
		Short:         "strata's node binary: the storage agent and the CSI driver",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(nodecmd.Agent(), nodecmd.CSI(version), nodecmd.Image(), cli.VersionCommand("strata-node", version))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata-node:", err)
		os.Exit(1)
	}
}
