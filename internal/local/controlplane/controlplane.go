// Package controlplane starts a local kube-apiserver and etcd (through
// controller-runtime's envtest) for `strata up` and for tests, with the
// binaries hack/control-plane.sh installs under bin/k8s.
package controlplane

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ErrNoBinaries means kube-apiserver or etcd is not installed.
var ErrNoBinaries = errors.New("control-plane binaries not found: run hack/control-plane.sh (make test and make up do)")

// Options describe the control plane to start.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd.
	AssetsDir string
	// CRDDirs hold CRDs to install once the API server is up.
	CRDDirs []string
	// EtcdDataDir keeps etcd's state across restarts when set.
	EtcdDataDir string
	// APIServerFlags are extra kube-apiserver flags.
	APIServerFlags map[string]string
	// CertDir, when set, holds the API server's serving certificate and
	// service-account keys, made beforehand (ServingCertificates), and
	// ServingCA is the CA that signed the serving certificate. A cluster
	// whose nodes and pods reach the API server at other addresses than
	// localhost needs both.
	CertDir   string
	ServingCA []byte
	// Log, when set, takes kube-apiserver's output.
	Log io.Writer
}

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	Config *rest.Config
	env    *envtest.Environment
}

// Start starts etcd and kube-apiserver and installs the CRDs.
func Start(o Options) (*ControlPlane, error) {
	if err := claimEtcdData(o.EtcdDataDir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.AssetsDir, "kube-apiserver")); err != nil {
		return nil, ErrNoBinaries
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: o.AssetsDir,
		CRDDirectoryPaths:     o.CRDDirs,
		ErrorIfCRDPathMissing: true,
	}
	if o.EtcdDataDir != "" {
		if err := os.MkdirAll(o.EtcdDataDir, 0o700); err != nil {
			return nil, err
		}
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: o.EtcdDataDir}
	}
	if o.CertDir != "" {
		env.ControlPlane.APIServer = &envtest.APIServer{CertDir: o.CertDir, StopTimeout: 10 * time.Second, Out: o.Log, Err: o.Log}
		// envtest keeps certificates it finds and then trusts this CA.
		env.ControlPlane.APIServer.CA = o.ServingCA
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	for k, v := range o.APIServerFlags {
		args.Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves the processes running when a later step, such as
		// installing a CRD the API server refuses, fails.
		_ = env.Stop()
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", o.AssetsDir, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return &ControlPlane{Config: cfg, env: env}, nil
}

// etcdGeneration names the etcd whose data this package keeps. Until
// 2026-11-25 it ran Debian's etcd 3.4, whose data the etcd 3.6 it runs now
// cannot read: 3.6 stops with "removed all voters".
const etcdGeneration = "etcd 3.6"

// etcdMarker is the file beside an etcd data directory that says which
// etcd wrote it; a file inside would be etcd's to complain about.
func etcdMarker(dir string) string { return filepath.Clean(dir) + ".written-by" }

// claimEtcdData refuses a data directory that an older etcd wrote, with
// what to do, before etcd is started on it and fails less clearly. A
// directory with no data yet is marked before etcd starts, so that a start
// that fails or crashes after etcd wrote its first files leaves data the
// next start accepts.
func claimEtcdData(dir string) error {
	if dir == "" {
		return nil
	}
	_, err := os.Stat(filepath.Join(dir, "member"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return err
		}
		return os.WriteFile(etcdMarker(dir), []byte(etcdGeneration+"\n"), 0o600)
	case err != nil:
		// Not etcd 3.4's data, whatever else it is: say what failed.
		return fmt.Errorf("etcd data directory %s cannot be read: %w", dir, err)
	}
	if b, err := os.ReadFile(etcdMarker(dir)); err == nil && strings.TrimSpace(string(b)) == etcdGeneration {
		return nil
	}
	return fmt.Errorf("etcd data directory %s has no mark of %s (%s): it was written by the etcd 3.4 this control plane ran before 2026-11-25, which %s cannot read; remove it (make clean removes .strata) to start afresh",
		dir, etcdGeneration, etcdMarker(dir), etcdGeneration)
}

// Stop stops kube-apiserver and etcd.
//
// A cluster whose nodes lost power leaves connections nobody closes, and
// the API server's graceful shutdown waits for them: envtest kills it
// after a while and reports a timeout, which loses nothing, as etcd holds
// the state, so it is not an error here.
func (c *ControlPlane) Stop() error {
	err := c.env.Stop()
	if err != nil && strings.Contains(err.Error(), "timeout waiting for process kube-apiserver to stop") {
		return nil
	}
	return err
}

// Kubeconfig returns a kubeconfig for an admin user of this control plane.
func (c *ControlPlane) Kubeconfig() ([]byte, error) {
	return c.KubeconfigFor("strata-admin", "system:masters")
}

// KubeconfigFor returns a kubeconfig for a user in groups, authenticated
// by a client certificate.
func (c *ControlPlane) KubeconfigFor(name string, groups ...string) ([]byte, error) {
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// CertDir is where the API server's certificates and keys are.
func (c *ControlPlane) CertDir() string { return c.env.ControlPlane.APIServer.CertDir }
