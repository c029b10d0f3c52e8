package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/nodestack"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/storage/csi"
)

// NodeName is the node `strata up` runs its storage agent as.
const NodeName = "strata-up"

const diskSize = 2 << 30

// startAgent gives the local control plane a node with two loop-device
// disks (sparse files in the state directory) and a btrfs storage host on
// a third, tells the example repository their paths and the btrfs
// agent's address through the ConfigMap flux-system/node-disks,
// and runs the node's storage agent, so that the repository's LVMCluster
// becomes a volume group and a thin pool, and both CSI services on
// sockets in the state directory. It needs root; without it the
// rest runs and it says so.
func startAgent(ctx context.Context, cfg *rest.Config, c client.Client, o Options, say func(string, ...any)) (<-chan error, func(), error) {
	if os.Geteuid() != 0 {
		say("storage agent not started: loop-device disks need root")
		return nil, func() {}, nil
	}
	dir := filepath.Join(o.StateDir, "disks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	var host *btrfsHost
	detach := func() {
		if host != nil {
			host.stop()
		}
		_ = loopdev.DetachUnder(o.StateDir)
	}
	disks := map[string]string{}
	for i := 1; i <= 2; i++ {
		dev, err := attachDisk(filepath.Join(dir, fmt.Sprintf("disk-%d.img", i)))
		if err != nil {
			detach()
			return nil, nil, err
		}
		disks[fmt.Sprintf("disk_%d", i)] = dev
	}
	btrfsDisk, err := attachDisk(filepath.Join(dir, "btrfs.img"))
	if err != nil {
		detach()
		return nil, nil, err
	}
	vars, host, err := startBtrfsHost(ctx, c, o, btrfsDisk, say)
	if err != nil {
		detach()
		return nil, nil, err
	}
	for k, v := range vars {
		disks[k] = v
	}
	if err := publishDisks(ctx, c, disks); err != nil {
		detach()
		return nil, nil, err
	}
	o2 := nodestack.Options{Node: NodeName, Namespace: "strata-system", Dir: o.StateDir,
		// Loop files: strata up is for trying strata out, on any kernel.
		Backend: "loopback"}
	if host != nil {
		o2.BtrfsBase = host.base()
	}
	stack, err := nodestack.Build(ctx, cfg, o2)
	if err != nil {
		detach()
		return nil, nil, err
	}
	parts := stack.Parts
	if host != nil {
		parts = append(parts, func() error { return <-host.done })
	}
	done := runAll(parts...)
	say("storage agent started as node %s (%s backend) with disks %s and %s", NodeName, o2.Backend, disks["disk_1"], disks["disk_2"])
	say("CSI driver %s: controller %s, node %s", csi.DriverName, stack.ControllerEndpoint, stack.NodeEndpoint)
	return done, detach, nil
}

// runAll runs the parts side by side and reports, once all have ended,
// what they ended with.
func runAll(parts ...func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		ended := make(chan error, len(parts))
		for _, part := range parts {
			go func() { ended <- part() }()
		}
		var errs []error
		for range parts {
			errs = append(errs, <-ended)
		}
		done <- errors.Join(errs...)
	}()
	return done
}

func attachDisk(img string) (string, error) {
	if _, err := os.Stat(img); os.IsNotExist(err) {
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			return "", err
		}
		if err := os.Truncate(img, diskSize); err != nil {
			return "", err
		}
	}
	return loopdev.Attach(img)
}

// publishDisks creates the Node and the ConfigMap of disk paths that the
// example repository substitutes into its LVMCluster.
func publishDisks(ctx context.Context, c client.Client, disks map[string]string) error {
	for _, obj := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "node-disks", Namespace: "flux-system"}, Data: disks}
	err := c.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, cm)
	}
	return err
}
