package btrfsagent

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/internal/testing/volsynctest"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
)

// SetUpReplication registers strata's VolSync movers with the manager,
// reaching btrfs hosts as the controller does (volsynctest.SetUpReplication),
// and returns the agents' resolver, for other reconcilers to share.
func SetUpReplication(mgr manager.Manager) (mover.Agents, error) {
	agents := btrfsbackend.New(mgr.GetClient(), mgr.GetAPIReader(), 30*time.Second)
	return agents, volsynctest.SetUpReplication(mgr, agents)
}
