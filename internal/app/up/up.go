// Package up runs strata end to end on one machine: the local cluster
// (internal/local/cluster: a control plane and two nodes with kubelets),
// strata installed into it with its Helm chart, the example repository
// served over git's smart HTTP on the nodes' network, and the Flux
// bootstrap objects; then it reports progress until everything in Git is
// applied, every claim is Bound and every app runs.
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
	"strconv"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/internal/local/release"
	"github.com/strata-gitops/strata/internal/scheme"
)

// Options for `strata up`.
type Options struct {
	// StateDir keeps the cluster's state (etcd, nodes, disks), the git
	// repository and its work tree, so a second run resumes where the
	// first stopped.
	StateDir   string
	ClusterDir string
	// Root is strata's source tree: the chart and the example app come
	// from it. Bin holds the binaries (bin/strata, bin/k8s, bin/sidecars,
	// bin/helm).
	Root, Bin string
	// GitPort is where the git server listens, on the host's address on
	// the nodes' network.
	GitPort int
	// DashboardPort is the host port (on 127.0.0.1) forwarded to the
	// controller's dashboard; 0 takes any free one.
	DashboardPort int
	// Cluster are the nodes and networks; up fills in the rest.
	Cluster cluster.Options
	Out     io.Writer
}

// Defaults are the options of `make up` in the source tree root.
func Defaults(root string) Options {
	bin := filepath.Join(root, "bin")
	return Options{
		StateDir: filepath.Join(root, ".strata"), ClusterDir: filepath.Join(root, "clusters", "homelab"),
		Root: root, Bin: bin, GitPort: 8480, DashboardPort: 9080,
		Cluster: cluster.Defaults("", filepath.Join(bin, "k8s")),
	}
}

const namespace = "strata-system"

// Run brings everything up and blocks until ctx ends, then stops it all,
// keeping the state.
func Run(ctx context.Context, o Options) error {
	if os.Geteuid() != 0 {
		return errors.New("strata up needs root: its nodes have their own network namespaces, cgroups and loop-device disks (run it as root, e.g. sudo make up)")
	}
	began := time.Now()
	say := sayer(o.Out, began)

	built, err := buildRelease(ctx, o, say)
	if err != nil {
		return err
	}
	// The cluster becomes Ready without MinIO, which only the example's
	// Bucket needs: it builds while the nodes start strata.
	minio := buildLater(ctx, o, "minio")
	c, err := startCluster(ctx, o, built, say)
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the nodes and the control plane (state kept in %s)", o.StateDir)
		if err := c.Stop(); err != nil {
			say("stopping: %v", err)
		}
	}()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	if err := install(ctx, o, c, cl, built, say); err != nil {
		return err
	}

	gitAddr := net.JoinHostPort(c.HostIP().String(), strconv.Itoa(o.GitPort))
	repoURL := fmt.Sprintf("http://%s/%s.git", gitAddr, filepath.Base(o.ClusterDir))
	repo, err := seedRepository(o, repoURL)
	if err != nil {
		return err
	}
	var hookPath atomic.Value // set once the Receiver has its path
	stopGit, err := serveGit(o, gitAddr, func() {
		if path, ok := hookPath.Load().(string); ok {
			notify(ctx, cl, path)
		}
	})
	if err != nil {
		return err
	}
	defer stopGit()
	say("git repository %s (work tree %s)", repoURL, repo.work)

	if err := describeNodes(ctx, cl, c); err != nil {
		return err
	}
	if err := demoDecryptionKey(ctx, cl, o); err != nil {
		return err
	}
	// A step left running in the background (MinIO's) that fails ends
	// the watch of the example below with its error.
	watch, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	stopSources, err := demoSources(ctx, cl, o, c, minio, fail, say)
	if err != nil {
		return err
	}
	defer stopSources()
	say("the example's other sources: an OCI artifact in the registry (%s/%s) and a bucket in MinIO (%s:%s)", c.Registry(), ociRepository, c.HostIP(), minioPort)
	path, err := bootstrap(ctx, cl, repoURL)
	if err != nil {
		return err
	}
	hookPath.Store(path)
	say("bootstrap applied: GitRepository, root Kustomization and a Receiver (%s on the controller's pod) in flux-system", path)

	if err := watchProgress(watch, cl, o.Out); err != nil {
		return failedOr(watch, err)
	}
	if err := waitWorkloads(watch, cl, o.Out, began); err != nil {
		return failedOr(watch, err)
	}
	say("everything in Git runs, %s after start", time.Since(began).Round(time.Second))
	kubectl := kubectlFor(o, c)
	show(o.Out, kubectl, "get", "pods", "-A", "-o", "wide")
	fmt.Fprintln(o.Out, "The example app's volumes hold:")
	show(o.Out, kubectl, "-n", "apps", "logs", "deployment/example-app")
	dashboardURL, err := forwardDashboard(ctx, c.Config, o)
	if err != nil {
		return err
	}
	printNextSteps(o.Out, repo.work, c.KubeconfigPath(), filepath.Join(o.Bin, "k8s"), dashboardURL)
	<-ctx.Done()
	return nil
}

// BuildRelease builds the local release of the source tree and nothing
// else: `make up` runs it while Kubernetes is still being built, and Run
// then finds it.
func BuildRelease(ctx context.Context, o Options) error {
	_, err := buildRelease(ctx, o, sayer(o.Out, time.Now()))
	return err
}

// sayer prints a step as it starts, with how long after began: the time
// each step took reads off the lines.
func sayer(out io.Writer, began time.Time) func(string, ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(out, "► %5s  "+format+"\n", append([]any{sinceStart(began)}, args...)...)
	}
}

// buildRelease builds the release of the source tree, as `make release`
// does, once for each state of the tree: every image the cluster runs is
// the release's, pulled from the cluster's registry.
func buildRelease(ctx context.Context, o Options, say func(string, ...any)) (*release.Built, error) {
	say("building the release of this source tree with hack/release (once per change; a few minutes the first time)")
	b, err := release.BuildLocal(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	say("release %s in %s", b.Version, b.Dir)
	return b, nil
}

func serveGit(o Options, addr string, onPush func()) (stop func(), err error) {
	h, err := gitserver.Handler(filepath.Join(o.StateDir, "git"), func(string) { onPush() })
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving git on %s: %w (is another strata up running?)", addr, err)
	}
	srv := httpserver.New("", h)
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// notify calls the Receiver on the controller's pod the way a forge would
// after a push. The host routes to every node's pods.
func notify(ctx context.Context, cl client.Client, path string) {
	go func() {
		ip, err := controllerIP(ctx, cl)
		if err != nil {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort(ip, "9292")+path, nil)
		if err != nil {
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
}

// sinceStart is the time since began as m:ss.
func sinceStart(began time.Time) string {
	d := time.Since(began).Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
