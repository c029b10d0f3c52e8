package agent

import (
	"context"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/strata-gitops/strata/storage/csi"
)

// StackOptions describe one node's storage stack on this machine: its
// agent and both CSI services, on unix sockets in a directory, as the
// CSI test environment runs it.
type StackOptions struct {
	// Node is the node's name; Namespace holds its LVMClusters.
	Node, Namespace string
	// Backend is the agent's volume manager: lvm2, or loopback.
	Backend string
	// Dir holds the loopback volumes and the sockets.
	Dir string
	// BtrfsBase is a btrfs volume agent's base on this node, if one runs.
	BtrfsBase string
	// Wait bounds how long a CSI controller call waits for the agent.
	Wait time.Duration
	// AgentConfig and ControllerConfig are what the agent and the CSI
	// controller talk to the API server as; nil for the config given.
	AgentConfig, ControllerConfig *rest.Config
}

// Stack is a node's stack, ready to run.
type Stack struct {
	ControllerEndpoint, NodeEndpoint, AgentSocket string
	// Parts are the agent and the two CSI services; each runs until ctx
	// ends.
	Parts []func() error
}

// BuildStack assembles the stack; nothing runs until its parts are called.
// The agent is assembled by New like any other, its Lease and self-fence
// included.
func BuildStack(ctx context.Context, cfg *rest.Config, o StackOptions) (*Stack, error) {
	ao := Defaults()
	ao.Node, ao.Namespace, ao.LVM.Backend = o.Node, o.Namespace, o.Backend
	ao.LVM.LoopbackDir, ao.LVM.MinDeviceSize = filepath.Join(o.Dir, "loopback"), 64<<20
	ao.MetricsAddr, ao.HealthProbeAddr = "0", "0"
	ao.LVM.APISocket = filepath.Join(o.Dir, "agent.sock")
	a, err := New(ctx, or(o.AgentConfig, cfg), ao)
	if err != nil {
		return nil, err
	}
	controller, node := csi.Defaults(), csi.Defaults()
	controller.Endpoint = "unix://" + filepath.Join(o.Dir, "csi-controller.sock")
	if o.Wait > 0 {
		controller.Wait = o.Wait
	}
	node.Mode, node.Endpoint = "node", "unix://"+filepath.Join(o.Dir, "csi-node.sock")
	node.NodeName, node.NodeIP, node.AgentSocket, node.BtrfsBase = o.Node, "127.0.0.1", ao.LVM.APISocket, o.BtrfsBase
	return &Stack{ControllerEndpoint: controller.Endpoint, NodeEndpoint: node.Endpoint, AgentSocket: ao.LVM.APISocket,
		Parts: []func() error{
			func() error { return a.Start(ctx) },
			func() error { return csi.Run(ctx, or(o.ControllerConfig, cfg), controller) },
			func() error { return csi.Run(ctx, nil, node) },
		}}, nil
}

func or(cfg, fallback *rest.Config) *rest.Config {
	if cfg != nil {
		return cfg
	}
	return fallback
}
