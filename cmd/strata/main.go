// Command strata is strata's binary: the controller, the local
// development environment and the developer tools are its subcommands,
// and the node's commands too (cmd/strata-node is those alone).
package main

import (
	"github.com/strata-gitops/strata/cmd/internal/cli"
	"github.com/strata-gitops/strata/cmd/internal/nodecmd"
)

// version is set at link time (make build, the release).
var version = "dev"

func main() {
	cli.Run("strata", "GitOps control plane for node-local storage", exitCode,
		controllerCommand(), nodecmd.Agent(), nodecmd.CSI(version), upCommand(), buildCommand(), planCommand(), failoverCommand(), nodecmd.Image(),
		cli.VersionCommand("strata", version))
}
