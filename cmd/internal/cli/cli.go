// Package cli holds what every strata binary's commands share: the
// logger, the API server's configuration from a flag, and the version
// command.
package cli

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Run runs a binary's root command, named name, with its commands: an
// error is printed after the binary's name (unless it says nothing, as
// one carrying only an exit code does) and ends the process with
// exitCode's code for it.
func Run(name, short string, exitCode func(error) int, commands ...*cobra.Command) {
	root := &cobra.Command{Use: name, Short: short, SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(commands...)
	if err := root.Execute(); err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, name+":", msg)
		}
		os.Exit(exitCode(err))
	}
}

// NewLogger logs JSON lines with millisecond timestamps, as Flux's
// controllers do: events on a busy controller are milliseconds apart.
func NewLogger() logr.Logger {
	return zap.New(func(o *zap.Options) { o.TimeEncoder = zapcore.ISO8601TimeEncoder })
}

// RestConfig is the API server's configuration from a kubeconfig file,
// or the in-cluster (or $KUBECONFIG) one when the flag is empty.
func RestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// VersionCommand prints the binary's name, its version (set at link
// time) and the Go it was built with.
func VersionCommand(name, version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the " + name + " version",
		Run: func(cmd *cobra.Command, _ []string) {
			goVersion := ""
			if info, ok := debug.ReadBuildInfo(); ok {
				goVersion = info.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s)\n", name, version, goVersion)
		},
	}
}
