// Package up runs strata end to end on one machine: a local control plane,
// the example repository served over git's smart HTTP on loopback, the
// controller, and the Flux bootstrap objects, then reports progress until
// every Kustomization is Ready.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/internal/local/controlplane"
	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/internal/scheme"
)

// Options for `strata up`.
type Options struct {
	// StateDir keeps etcd data, the git repository and artifacts, so a
	// second run resumes where the first stopped.
	StateDir   string
	ClusterDir string
	CRDDir     string
	AssetsDir  string
	GitAddr    string
	HookAddr   string
	// VolumeAPIAddr and NFSAddr are where the btrfs storage host serves
	// its volume API and NFS-Ganesha.
	VolumeAPIAddr string
	NFSAddr       string
	Out           io.Writer
}

// Run brings everything up and blocks until ctx ends, then stops it all.
func Run(ctx context.Context, o Options) error {
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, "► "+format+"\n", args...) }

	say("starting kube-apiserver and etcd (state in %s)", filepath.Join(o.StateDir, "etcd"))
	cp, err := controlplane.Start(controlplane.Options{
		AssetsDir: o.AssetsDir, CRDDirs: []string{o.CRDDir}, EtcdDataDir: filepath.Join(o.StateDir, "etcd"),
		APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/12"},
	})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping kube-apiserver and etcd")
		_ = cp.Stop()
	}()
	kubeconfig := filepath.Join(o.StateDir, "kubeconfig")
	if err := writeKubeconfig(cp, kubeconfig); err != nil {
		return err
	}
	say("API server at %s, kubeconfig %s", cp.Config.Host, kubeconfig)

	repoURL := fmt.Sprintf("http://%s/%s.git", o.GitAddr, filepath.Base(o.ClusterDir))
	repo, err := seedRepository(o, repoURL)
	if err != nil {
		return err
	}
	var hookURL atomic.Value // set once the Receiver has its path
	stopGit, err := serveGit(o, func() {
		if url, ok := hookURL.Load().(string); ok {
			notify(url)
		}
	})
	if err != nil {
		return err
	}
	defer stopGit()
	say("git repository %s (work tree %s)", repoURL, repo.work)

	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgrDone, err := startController(ctx, cp.Config, o)
	if err != nil {
		return err
	}
	say("controller started (artifacts in %s)", filepath.Join(o.StateDir, "controller"))
	agentDone, detachDisks, err := startAgent(ctx, cp.Config, c, o, say)
	if err != nil {
		return err
	}
	defer detachDisks()

	path, err := bootstrap(ctx, c, repoURL)
	if err != nil {
		return err
	}
	hookURL.Store("http://" + o.HookAddr + path)
	say("bootstrap applied: GitRepository, root Kustomization and a Receiver (POST http://%s%s) in flux-system", o.HookAddr, path)

	if err := watchProgress(ctx, c, o.Out); err != nil {
		return err
	}
	printNextSteps(o.Out, repo.work, kubeconfig)
	<-ctx.Done()
	cancel()
	var agentErr error
	if agentDone != nil {
		agentErr = <-agentDone
	}
	return errors.Join(<-mgrDone, agentErr)
}

func writeKubeconfig(cp *controlplane.ControlPlane, path string) error {
	data, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func serveGit(o Options, onPush func()) (stop func(), err error) {
	h, err := gitserver.Handler(filepath.Join(o.StateDir, "git"), func(string) { onPush() })
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.GitAddr)
	if err != nil {
		return nil, fmt.Errorf("serving git on %s: %w (is another strata up running?)", o.GitAddr, err)
	}
	srv := httpserver.New("", h)
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// notify calls the Receiver the way a forge would after a push.
func notify(url string) {
	go func() {
		resp, err := http.Post(url, "application/json", nil) //nolint:gosec,noctx // loopback URL we built
		if err == nil {
			resp.Body.Close()
		}
	}()
}

func startController(ctx context.Context, cfg *rest.Config, o Options) (<-chan error, error) {
	mo := manager.Defaults()
	mo.MetricsAddr, mo.HealthProbeAddr = "0", "0"
	mo.ArtifactDir = filepath.Join(o.StateDir, "controller")
	mo.ArtifactAddr = "0"
	mo.ReceiverAddr = o.HookAddr
	mgr, err := manager.New(ctx, cfg, mo)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}
