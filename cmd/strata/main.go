// Command strata is the one binary of strata: the controller, the local
// development environment and the developer tools are its subcommands.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "GitOps control plane for node-local storage",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(controllerCommand(), agentCommand(), csiCommand(), upCommand(), buildCommand(), planCommand(), failoverCommand(), imageCommand(), versionCommand())
	if err := root.Execute(); err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "strata:", msg)
		}
		os.Exit(exitCode(err))
	}
}
