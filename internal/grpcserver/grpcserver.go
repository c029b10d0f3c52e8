// Package grpcserver serves gRPC services on a unix socket until a
// context ends: the CSI services and the agent's local API share it.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
)

// SocketPath returns the path of a unix endpoint, given as a path or as
// unix://path (the form CSI sidecars and csi-sanity use).
func SocketPath(endpoint string) (string, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if path == "" || strings.Contains(path, "://") {
		return "", fmt.Errorf("endpoint %q: give a unix socket, as /path/to/csi.sock or unix:///path/to/csi.sock", endpoint)
	}
	return path, nil
}

// Serve listens on the unix endpoint, lets register add services, and
// serves until ctx ends, then stops gracefully. A socket left by an
// earlier run is replaced. The socket is for root only.
func Serve(ctx context.Context, endpoint string, register func(*grpc.Server), opts ...grpc.ServerOption) error {
	path, err := SocketPath(endpoint)
	if err != nil {
		return err
	}
	lis, err := listenUnix(path)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(opts...)
	register(srv)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		srv.GracefulStop()
	}()
	err = srv.Serve(lis)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving on %s: %w", path, err)
	}
	<-stopped
	return nil
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	return lis, nil
}
