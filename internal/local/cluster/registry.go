package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/strata-gitops/strata/internal/local/registry"
)

// RegistryPort is the port of the cluster's registry on the host's
// address on the nodes' network; RegistryName is its name on the nodes,
// so that images in a repository are named the same whatever the
// cluster's addresses: strata.local/strata/example-app is pulled from it.
const (
	RegistryPort = 5000
	RegistryName = "strata.local"
)

// Registry is the address of the cluster's OCI registry, HOST:PORT, as
// the host and the nodes reach it.
func (c *Cluster) Registry() string {
	return net.JoinHostPort(c.o.Network.HostIP().String(), strconv.Itoa(RegistryPort))
}

// startRegistry runs the registry and waits until it answers.
func (c *Cluster) startRegistry(ctx context.Context) error {
	if c.o.Registry == "" {
		return fmt.Errorf("no registry program: run hack/tools.sh registry")
	}
	cmd, err := registry.Start(ctx, c.o.Registry, c.o.Dir, c.Registry(), c.logPath("registry"))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, cmd)
	return nil
}
