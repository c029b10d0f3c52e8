package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// RegistryPort is the port of the cluster's registry on the host's
// address on the nodes' network; RegistryName is its name on the nodes,
// so that images in a repository are named the same whatever the
// cluster's addresses: strata.local/strata/example-app is pulled from it.
const (
	RegistryPort = 5000
	RegistryName = "strata.local"
)

// registryConfig stores under the cluster's directory, so that what was
// pushed outlives a restart, and serves plain HTTP on the nodes' private
// network only: nothing outside this machine reaches that address.
const registryConfig = `version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: false
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
`

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
	if _, err := os.Stat(c.o.Registry); err != nil {
		return fmt.Errorf("the registry program %s: %w (run hack/tools.sh registry)", c.o.Registry, err)
	}
	config := filepath.Join(c.o.Dir, "registry.yaml")
	content := fmt.Sprintf(registryConfig, filepath.Join(c.o.Dir, "registry"), c.Registry())
	if err := writeFile(config, []byte(content)); err != nil {
		return err
	}
	if err := c.runProgram(c.o.Registry, "serve", config); err != nil {
		return err
	}
	url := "http://" + c.Registry() + "/v2/"
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("the registry at %s did not answer (see %s): %w", url, c.logPath("registry"), err)
	}
	return nil
}
