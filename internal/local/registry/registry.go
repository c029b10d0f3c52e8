// Package registry runs an OCI registry on this machine: distribution's
// (bin/registry, hack/tools.sh registry), storing under a directory of
// its own, serving plain HTTP at one address. The local cluster's nodes
// pull from it; the release's tests push to it.
package registry

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/strata-gitops/strata/internal/local/process"
)

// config stores under dir, so that what was pushed outlives a restart,
// and serves plain HTTP at addr only.
const config = `version: 0.1
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

// Start runs the registry program at addr (HOST:PORT), storing under
// dir, with its log in logPath, and waits until it answers. The caller
// ends the returned process.
func Start(ctx context.Context, program, dir, addr, logPath string) (*exec.Cmd, error) {
	if _, err := os.Stat(program); err != nil {
		return nil, fmt.Errorf("the registry program %s: %w (run hack/tools.sh registry)", program, err)
	}
	path := filepath.Join(dir, "registry.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf(config, filepath.Join(dir, "registry"), addr)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(program, "serve", path)
	if err := process.Start(cmd, logPath); err != nil {
		return nil, err
	}
	url := "http://" + addr + "/v2/"
	if err := process.WaitAnswers(ctx, cmd, url, 30*time.Second); err != nil {
		return nil, fmt.Errorf("the registry at %s did not answer (see %s): %w", url, logPath, err)
	}
	return cmd, nil
}
