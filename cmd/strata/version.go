package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time by the Makefile.
var version = "dev"

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the strata version",
		Run: func(cmd *cobra.Command, _ []string) {
			goVersion := ""
			if info, ok := debug.ReadBuildInfo(); ok {
				goVersion = info.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "strata %s (%s)\n", version, goVersion)
		},
	}
}
