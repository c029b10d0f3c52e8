// Package testenv is the one place tests get real infrastructure from: a
// kube-apiserver with etcd (envtest, using the binaries hack/control-plane.sh
// installs) and git repositories served over smart HTTP on loopback.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/controlplane"
	"github.com/strata-gitops/strata/internal/scheme"
)

// Env is a running API server with strata's CRDs installed.
type Env struct {
	Config *rest.Config
	Client client.Client
	cp     *controlplane.ControlPlane
	// kubeconfig is an administrator's kubeconfig of an API server
	// another process started (KubeconfigVar).
	kubeconfig []byte
}

// KubeconfigVar names a kubeconfig file of an API server with strata's
// CRDs that Get returns instead of starting one: a test in a guest
// (internal/testing/guest) is given the host's.
const KubeconfigVar = "STRATA_TEST_KUBECONFIG"

// fromKubeconfig is the API server a kubeconfig file names.
func fromKubeconfig(path string) (*Env, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	return &Env{Config: cfg, Client: c, kubeconfig: data}, nil
}

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
func StartAPIServer(apiserverFlags map[string]string) (*Env, error) {
	return StartAPIServerWithCRDs(apiserverFlags, filepath.Join(RepoRoot(), "charts", "strata", "crds"))
}

// StartAPIServerWithCRDs starts kube-apiserver and etcd with the CRDs of
// the directories named, such as a cluster Flux installed (FluxCRDDir).
func StartAPIServerWithCRDs(apiserverFlags map[string]string, crdDirs ...string) (*Env, error) {
	cp, err := controlplane.Start(controlplane.Options{
		AssetsDir:      AssetsDir(),
		CRDDirs:        crdDirs,
		APIServerFlags: apiserverFlags,
	})
	if err != nil {
		return nil, err
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return &Env{Config: cp.Config, Client: c, cp: cp}, nil
}

// Stop stops the API server and etcd, if this process started them.
func (e *Env) Stop() error {
	if e.cp == nil {
		return nil
	}
	return e.cp.Stop()
}

// adminKubeconfig is an administrator's kubeconfig of the API server.
func (e *Env) adminKubeconfig() ([]byte, error) {
	if e.cp == nil {
		return e.kubeconfig, nil
	}
	return e.cp.Kubeconfig()
}

// The package's API server, started by the first test that asks for it.
var (
	sharedOnce sync.Once
	shared     *Env
	sharedErr  error
)

// Main runs a test package's tests and stops its API server, if one was
// started: a run of only the tests that need none starts none.
func Main(m *testing.M) int {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	code := m.Run()
	if gcStop != nil {
		gcStop()
	}
	if shared != nil {
		_ = shared.Stop()
	}
	return code
}

// Get returns the package's API server, starting it on first use. Without
// the binaries the test skips, and fails in CI.
func Get(t testing.TB) *Env {
	t.Helper()
	sharedOnce.Do(func() {
		if path := os.Getenv(KubeconfigVar); path != "" {
			shared, sharedErr = fromKubeconfig(path)
			return
		}
		shared, sharedErr = StartAPIServer(nil)
	})
	if shared == nil {
		Unavailable(t, fmt.Sprintf("starting the API server: %v", sharedErr))
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

// Clientset returns a client-go clientset, for tests that watch the order
// in which objects change.
func (e *Env) Clientset() *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(e.Config)
}

// KubeconfigFileAs writes a kubeconfig that acts as user (an
// administrator impersonating it), for a program that must be that user
// to the API server, as a controller running under its service account
// is.
func (e *Env) KubeconfigFileAs(t testing.TB, user string, groups ...string) string {
	t.Helper()
	data, err := e.adminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = user, append(groups, "system:authenticated")
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-as")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeconfigFile writes an administrator's kubeconfig of the API server
// to a file of the test's, for commands that take --kubeconfig.
func (e *Env) KubeconfigFile(t testing.TB) string {
	t.Helper()
	data, err := e.adminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
