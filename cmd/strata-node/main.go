// Command strata-node is what every node runs and pulls: the storage
// agent, the CSI driver's services and the image jobs' client, without
// the controller, the plan (Helm's SDK) or SOPS (cloud key services),
// which only cmd/strata links.
package main

import (
	"github.com/strata-gitops/strata/cmd/internal/cli"
	"github.com/strata-gitops/strata/cmd/internal/nodecmd"
)

// version is set at link time (the release).
var version = "dev"

func main() {
	cli.Run("strata-node", "strata's node binary: the storage agent and the CSI driver", func(error) int { return 1 },
		nodecmd.Agent(), nodecmd.CSI(version), nodecmd.Image(), cli.VersionCommand("strata-node", version))
}
