package nfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/strata-gitops/strata/internal/atomicfile"
)

// GaneshaServer is an NFS-Ganesha process run by strata itself, for
// development machines, `make up` and tests; a storage host runs its
// distribution's service and includes the agent's exports file instead
// (docs/btrfs.md).
type GaneshaServer struct {
	Ganesha
	// Addr is host:port the server listens on (NFSv4 over TCP).
	Addr string
	cmd  *exec.Cmd
	done chan error
}

// StartGanesha runs ganesha.nfsd in the foreground with its files under
// dir, serving NFSv4 on addr (host:port), and returns once it accepts
// connections. Stop ends it.
func StartGanesha(ctx context.Context, dir, addr string) (*GaneshaServer, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("NFS-Ganesha address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("NFS-Ganesha address %q: port: %w", addr, err)
	}
	recovery := filepath.Join(dir, "recovery")
	if err := os.MkdirAll(recovery, 0o755); err != nil {
		return nil, err
	}
	s := &GaneshaServer{
		Ganesha: Ganesha{ExportsFile: filepath.Join(dir, "exports.conf"), PIDFile: filepath.Join(dir, "ganesha.pid")},
		Addr:    addr, done: make(chan error, 1),
	}
	// An exports file from an earlier run is kept: its exports are served again.
	if _, err := os.Stat(s.ExportsFile); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.Write(s.ExportsFile, ganeshaConfig(nil)); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(dir, "ganesha.conf")
	if err := os.WriteFile(config, []byte(serverConfig(host, port, recovery, s.ExportsFile)), 0o644); err != nil {
		return nil, err
	}
	s.cmd = exec.Command("ganesha.nfsd", "-F", "-f", config, "-p", s.PIDFile, "-L", filepath.Join(dir, "ganesha.log"), "-N", "NIV_EVENT")
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting NFS-Ganesha (install nfs-ganesha and nfs-ganesha-vfs; hack/packages.sh does): %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitListening(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *GaneshaServer) waitListening(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			conn.Close()
			if _, err := os.Stat(s.PIDFile); err == nil {
				return nil
			}
		}
		select {
		case err := <-s.done:
			return fmt.Errorf("NFS-Ganesha exited at start (%v); see %s", err, filepath.Join(filepath.Dir(s.PIDFile), "ganesha.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NFS-Ganesha does not accept connections on %s after 30 s", s.Addr)
		}
	}
}

// Stop ends the server and waits for it.
func (s *GaneshaServer) Stop() {
	_ = s.cmd.Process.Kill()
	exited := <-s.done
	s.done <- exited // a second Stop returns at once
}

// serverConfig is a minimal NFSv4-only configuration: no portmapper, NLM
// or rquota (NFSv4 needs none), no grace period (nothing to recover on a
// development machine), client state kept under dir.
func serverConfig(host, port, recovery, exports string) string {
	return fmt.Sprintf(`NFS_CORE_PARAM {
  NFS_Port = %s;
  Bind_addr = %s;
  Protocols = 4;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  Enable_UDP = false;
}
NFSV4 { Graceless = true; RecoveryBackend = fs; RecoveryRoot = "%s"; }
NFS_KRB5 { Active_krb5 = false; }
%%include "%s"
`, port, host, recovery, exports)
}
