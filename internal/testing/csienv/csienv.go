// Package csienv runs strata's whole CSI path on this machine against a
// running API server: a Node with a loop-device disk, an LVMCluster with
// one thin device class on it, the node's agent, and both CSI services on
// unix sockets. csi-sanity in `make test`, `make sanity` and the CSI
// benchmark use it.
package csienv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/mount-utils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/app/agent"
	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/scheme"
)

// Options describe the environment.
type Options struct {
	// Dir holds the disk image, the loopback volumes and the sockets.
	Dir string
	// Node is the node's name; also the namespace of its LVMCluster.
	Node string
	// Class is the thin device class, the default one.
	Class    string
	DiskSize int64
	// Backend is the agent's: loopback or lvm2.
	Backend string
	// Ready bounds the wait for the agent to report capacity.
	Ready time.Duration
	// AgentConfig and ControllerConfig, when set, are what the agent and
	// the CSI controller talk to the API server as (a service account of
	// the Helm chart, say); the environment itself is set up with the
	// configuration Start is given.
	AgentConfig, ControllerConfig *rest.Config
	// BtrfsTLS serves the btrfs volume API over TLS, with a certificate
	// issued at start by a CA the StorageClass names.
	BtrfsTLS bool
}

// Defaults is a node "sanity-node" with an 8 GiB disk (sparse) and a thin
// class "thin" overprovisioned tenfold, so that csi-sanity's 10 GiB
// volumes fit.
func Defaults(dir string) Options {
	return Options{Dir: dir, Node: "sanity-node", Class: "thin", DiskSize: 8 << 30, Backend: "loopback", Ready: 2 * time.Minute}
}

// Env is a running CSI path.
type Env struct {
	Options
	ControllerEndpoint, NodeEndpoint string
	Client                           client.Client
	Disk                             string
	cancel                           context.CancelFunc
	done                             []chan error
	btrfs                            *btrfsParts
	stopOnce                         sync.Once
	stopErr                          error
}

// Start builds the environment and returns once both CSI services answer
// and the agent has reported the class's capacity.
func Start(ctx context.Context, cfg *rest.Config, o Options) (env *Env, err error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	env = &Env{Client: c, Options: o, cancel: cancel}
	defer func() {
		if err != nil {
			_ = env.Stop()
		}
	}()
	if env.Disk, err = attachDisk(o); err != nil {
		return env, err
	}
	if err = createCluster(ctx, c, o, env.Disk); err != nil {
		return env, err
	}
	if err := env.runStack(ctx, cfg, ""); err != nil {
		return env, err
	}
	if err := env.waitReady(ctx); err != nil {
		return env, err
	}
	return env, nil
}

// runStack runs the node's agent and both CSI services.
func (e *Env) runStack(ctx context.Context, cfg *rest.Config, btrfsBase string) error {
	stack, err := agent.BuildStack(ctx, cfg, agent.StackOptions{Node: e.Node, Namespace: e.Node, Backend: e.Backend, Dir: e.Dir,
		BtrfsBase: btrfsBase, Wait: time.Minute, AgentConfig: e.AgentConfig, ControllerConfig: e.ControllerConfig})
	if err != nil {
		return err
	}
	e.ControllerEndpoint, e.NodeEndpoint = stack.ControllerEndpoint, stack.NodeEndpoint
	for _, part := range stack.Parts {
		e.run(part)
	}
	return nil
}

func (e *Env) run(f func() error) {
	done := make(chan error, 1)
	e.done = append(e.done, done)
	go func() { done <- f() }()
}

// Stop stops everything and takes the disk away: the volume group, its
// volumes and the loop devices. It returns the first error a part of the
// environment stopped with. Stopping again returns the same.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() { e.stopErr = e.stop() })
	return e.stopErr
}

func (e *Env) stop() error {
	e.cancel()
	var first error
	for _, done := range e.done {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	if e.btrfs != nil {
		e.btrfs.stop(e.Client)
	}
	e.forgetCluster()
	unmountUnder(e.Dir)
	_ = loopdev.DetachUnder(filepath.Join(e.Dir, "loopback"))
	if e.Disk != "" {
		localdisk.ForgetLVM([]string{e.Class}, e.Disk)
	}
	_ = loopdev.DetachUnder(e.Dir)
	return first
}

// SanityArgs are csi-sanity's arguments for this environment: its
// endpoints, and mount and staging directories under Dir.
func (e *Env) SanityArgs() []string {
	args := []string{"-csi.endpoint", e.NodeEndpoint, "-csi.controllerendpoint", e.ControllerEndpoint,
		"-csi.mountdir", filepath.Join(e.Dir, "mount"), "-csi.stagingdir", filepath.Join(e.Dir, "staging")}
	if e.btrfs != nil {
		args = append(args, e.btrfs.sanityArgs()...)
	}
	return args
}

// unmountUnder unmounts whatever a failed run left mounted under dir,
// deepest first, so that removing dir cannot reach into a volume.
func unmountUnder(dir string) {
	mounts, err := mount.New("").List()
	if err != nil {
		return
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for i := len(mounts) - 1; i >= 0; i-- {
		if strings.HasPrefix(mounts[i].Path, prefix) {
			_ = mount.New("").Unmount(mounts[i].Path)
		}
	}
}

// forgetCluster deletes the LVMCluster and the Node, so that a later
// environment on the same API server sees only its own default class.
func (e *Env) forgetCluster() {
	ctx := context.Background()
	for _, obj := range []client.Object{
		&storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: e.Node}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.Node}},
	} {
		_ = e.Client.Delete(ctx, obj)
	}
}

func attachDisk(o Options) (string, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return "", err
	}
	img := filepath.Join(o.Dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return "", err
	}
	if err := os.Truncate(img, o.DiskSize); err != nil {
		return "", err
	}
	return loopdev.Attach(img)
}

const clusterName = "csi"

// createCluster makes the Node, and the LVMCluster whose one default thin
// class uses the disk.
func createCluster(ctx context.Context, c client.Client, o Options, disk string) error {
	cluster := &storagev1alpha1.LVMCluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: o.Node},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{
			Name: o.Class, Default: true, FSType: "ext4",
			DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(disk)}},
			ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool", SizePercent: 90, OverprovisionRatio: 10},
		}}}},
	}
	for _, obj := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Node}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Node}},
		cluster,
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// waitReady polls, within the Ready bound, until the agent has written
// the class's capacity on the Node and both CSI services answer a probe.
func (e *Env) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.Ready)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		err := e.ready(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil { // the deadline's own error says nothing
			last = err
		}
		for _, done := range e.done {
			select {
			case err := <-done:
				done <- err // for Stop, which waits on every part
				return fmt.Errorf("a part of the CSI environment stopped: %v", err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CSI environment not ready in %s: %w", e.Ready, last)
		case <-tick.C:
		}
	}
}

func (e *Env) ready(ctx context.Context) error {
	if e.btrfs != nil {
		if err := e.btrfs.ready(ctx); err != nil {
			return err
		}
		return e.probeServices(ctx)
	}
	if err := e.probeServices(ctx); err != nil {
		return err
	}
	return e.controllerSeesCapacity(ctx)
}

// controllerSeesCapacity asks the CSI controller, not the API server,
// for the class's room: the controller places volumes from its own cache
// of the Nodes, which may lag the agent's annotation, and a CreateVolume
// sent before the cache has it finds no node.
func (e *Env) controllerSeesCapacity(ctx context.Context) error {
	conn, err := Dial(e.ControllerEndpoint)
	if err != nil {
		return err
	}
	defer conn.Close()
	rsp, err := csi.NewControllerClient(conn).GetCapacity(ctx, &csi.GetCapacityRequest{
		Parameters: map[string]string{storagev1alpha1.DeviceClassParameter: e.Class}})
	if err != nil {
		return fmt.Errorf("asking the controller for class %s's capacity: %w", e.Class, err)
	}
	if rsp.GetAvailableCapacity() == 0 {
		return errors.New("the CSI controller sees no capacity for class " + e.Class + " yet")
	}
	return nil
}

func (e *Env) probeServices(ctx context.Context) error {
	for _, endpoint := range []string{e.ControllerEndpoint, e.NodeEndpoint} {
		if err := probe(ctx, endpoint); err != nil {
			return err
		}
	}
	return nil
}

// Dial connects to one of the CSI endpoints.
func Dial(endpoint string) (*grpc.ClientConn, error) {
	return grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func probe(ctx context.Context, endpoint string) error {
	conn, err := Dial(endpoint)
	if err != nil {
		return err
	}
	defer conn.Close()
	rsp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return fmt.Errorf("probing %s: %w", endpoint, err)
	}
	if rsp.GetReady() != nil && !rsp.GetReady().GetValue() {
		return fmt.Errorf("%s is not ready", endpoint)
	}
	return nil
}
