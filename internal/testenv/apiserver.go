// Package testenv is the one place tests get real infrastructure from: a
// kube-apiserver with etcd (envtest, using the binaries hack/control-plane.sh
// installs) and git repositories served over smart HTTP on loopback.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/strata-gitops/strata/internal/scheme"
)

// Env is a running API server with strata's CRDs installed.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// ErrNoControlPlane means the control-plane binaries are not installed.
var ErrNoControlPlane = errors.New("control-plane binaries not found in bin/k8s: run hack/control-plane.sh (make test does)")

// InCI reports whether the tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// RepoRoot is the module root, found from the working directory.
func RepoRoot() string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// AssetsDir is where kube-apiserver and etcd are found.
func AssetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin", "k8s")
}

// StartAPIServer starts kube-apiserver and etcd with strata's CRDs.
// apiserverFlags are extra kube-apiserver flags as name, value pairs.
func StartAPIServer(apiserverFlags ...string) (*Env, error) {
	assets := AssetsDir()
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, ErrNoControlPlane
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "charts", "strata", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	for i := 0; i+1 < len(apiserverFlags); i += 2 {
		args.Set(apiserverFlags[i], apiserverFlags[i+1])
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: env}, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

var shared *Env
var sharedErr error

// Main starts one API server for a test package, runs its tests and stops
// it. Without the binaries, tests that call Get skip outside CI and the
// package fails in CI.
func Main(m *testing.M) int {
	shared, sharedErr = StartAPIServer()
	if sharedErr != nil && InCI() {
		fmt.Fprintln(os.Stderr, "testenv:", sharedErr)
		return 1
	}
	code := m.Run()
	if shared != nil {
		_ = shared.Stop()
	}
	return code
}

// Get returns the package's API server, skipping the test (failing it in
// CI) when there is none.
func Get(t testing.TB) *Env {
	t.Helper()
	if shared == nil {
		Unavailable(t, sharedErr.Error())
	}
	return shared
}

// Unavailable skips a test that lacks something it needs; in CI that is a
// failure, since CI must run every test.
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required in CI: %s", reason)
	}
	t.Skip(reason)
}
