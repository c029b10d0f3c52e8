// Package objectstore runs an S3 server on this machine: MinIO (bin/minio,
// hack/tools.sh minio), storing under a directory of its own. strata up
// serves the example repository's Bucket source from it; the image and
// Bucket tests read from one of their own.
package objectstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/strata-gitops/strata/internal/local/process"
)

// Server is a running MinIO: its S3 API at Endpoint (http://host:port),
// its root credentials, and the process.
type Server struct {
	Endpoint             string
	AccessKey, SecretKey string
	cmd                  *exec.Cmd
}

// Start runs program at addr (host:port) with its console at
// consoleAddr, storing under dir/data with its log in logPath, and waits
// until it is ready.
func Start(ctx context.Context, program, dir, addr, consoleAddr, logPath, accessKey, secretKey string) (*Server, error) {
	if _, err := os.Stat(program); err != nil {
		return nil, fmt.Errorf("the MinIO server %s: %w (run hack/tools.sh minio)", program, err)
	}
	cmd := exec.Command(program, "server", "--quiet", "--address", addr, "--console-address", consoleAddr, filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey, "MINIO_BROWSER=off")
	if err := process.Start(cmd, logPath); err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://" + addr, AccessKey: accessKey, SecretKey: secretKey, cmd: cmd}
	// The cluster check, not the readiness one: "ready" answers before
	// the object layer is up, and a first write then gets "Server not
	// initialized yet".
	err := process.WaitAnswers(ctx, cmd, s.Endpoint+"/minio/health/cluster", 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("MinIO at %s not ready after 30s (see %s): %w", s.Endpoint, logPath, err)
	}
	return s, nil
}

// Stop ends the server.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
