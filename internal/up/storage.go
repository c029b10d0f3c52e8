package up

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/storage/agent"
)

// NodeName is the node `strata up` runs its storage agent as.
const NodeName = "strata-up"

const diskSize = 2 << 30

// startAgent gives the local control plane a node with two loop-device
// disks (sparse files in the state directory), tells the example
// repository their paths through the ConfigMap flux-system/node-disks,
// and runs the node's storage agent, so that the repository's LVMCluster
// becomes a volume group and a thin pool. It needs root; without it the
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
	detach := func() { _ = loopdev.DetachUnder(o.StateDir) }
	disks := map[string]string{}
	for i := 1; i <= 2; i++ {
		dev, err := attachDisk(filepath.Join(dir, fmt.Sprintf("disk-%d.img", i)))
		if err != nil {
			detach()
			return nil, nil, err
		}
		disks[fmt.Sprintf("disk_%d", i)] = dev
	}
	if err := publishDisks(ctx, c, disks); err != nil {
		detach()
		return nil, nil, err
	}
	ao := agent.Defaults()
	ao.NodeName, ao.Namespace = NodeName, "strata-system"
	ao.LoopbackDir, ao.MinDeviceSize = filepath.Join(o.StateDir, "loopback"), 64<<20
	ao.MetricsAddr, ao.HealthProbeAddr = "0", "0"
	mgr, err := agent.NewManager(ctx, cfg, ao)
	if err != nil {
		detach()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	_, backend, _ := agent.VolumeManager(ao)
	say("storage agent started as node %s (%s backend) with disks %s and %s", NodeName, backend, disks["disk_1"], disks["disk_2"])
	return done, detach, nil
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
