// Command strata is strata's binary: the controller, the local
// development environment and the developer tools are its subcommands,
// and the node's commands too (cmd/strata-node is those alone).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/strata-gitops/strata/cmd/internal/cli"
	"github.com/strata-gitops/strata/cmd/internal/nodecmd"
)

// version is set at link time (make build, the release).
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "GitOps control plane for node-local storage",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(controllerCommand(), nodecmd.Agent(), nodecmd.CSI(version), upCommand(), buildCommand(), planCommand(), failoverCommand(), nodecmd.Image(),
		cli.VersionCommand("strata", version))
	if err := root.Execute(); err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "strata:", msg)
		}
		os.Exit(exitCode(err))
	}
}
