package volumegroups_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/lvmnode/volumegroups"
	"github.com/strata-gitops/strata/storage/lvm"
)

// A class that fails, here because a disk added to it cannot join its
// volume group, keeps the capacity it had on the Node for a grace period,
// so the scheduler still sees room there while the failure is fixed or
// passes; with no grace the same failure drops it, which shows the
// failing passes did write the Node.
func TestAClassFailingBrieflyKeepsItsCapacity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		dropped bool
	}{
		{"default grace", 0, false},
		{"no grace", time.Nanosecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if dropped := capacityDroppedByAFailure(t, tc.grace); dropped != tc.dropped {
				t.Errorf("grace %s: the Node lost the class's capacity: %v, want %v", tc.grace, dropped, tc.dropped)
			}
		})
	}
}

// capacityDroppedByAFailure makes a thick class Ready, then adds a disk
// to it that fails to join its group, and says whether the Node was
// written without the class's capacity in the two failing passes that
// follow.
func capacityDroppedByAFailure(t *testing.T, grace time.Duration) bool {
	env, m, nodeName := vgNode(t, "grace")
	c, ctx := env.Client, context.Background()
	class := fmt.Sprintf("grace-%d-%d", os.Getpid(), counter.Add(1))
	d1, d2, _ := disksFor(t, class)
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: nodeName},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{
			{Name: class, DeviceSelector: &storagev1alpha1.DeviceSelector{Paths: []storagev1alpha1.DevicePath{storagev1alpha1.DevicePath(d1)}}},
		}}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	flaky := &flakyLVM{Manager: m}
	runVolumeGroups(t, env, flaky, nodeName, func(r *volumegroups.Reconciler) { r.CapacityGrace = grace })
	annotation := storagev1alpha1.CapacityAnnotationPrefix + class
	node := &corev1.Node{}
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return err
		}
		if node.Annotations[annotation] == "" {
			return fmt.Errorf("no %s on the Node yet", annotation)
		}
		return nil
	})

	watchCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	w, err := env.Clientset().CoreV1().Nodes().Watch(watchCtx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + nodeName, ResourceVersion: node.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var dropped atomic.Bool
	var lastSeen atomic.Value
	lastSeen.Store(node.ResourceVersion)
	go func() {
		for e := range w.ResultChan() {
			if n, ok := e.Object.(*corev1.Node); ok {
				if n.Annotations[annotation] == "" {
					dropped.Store(true)
				}
				lastSeen.Store(n.ResourceVersion)
			}
		}
	}()

	testenv.Update(t, c, cluster, func(l *storagev1alpha1.LVMCluster) {
		paths := &l.Spec.Storage.DeviceClasses[0].DeviceSelector.Paths
		*paths = append(*paths, storagev1alpha1.DevicePath(d2))
	})
	// A pass has written the Node once the next has begun.
	testenv.Eventually(t, timeout, func() error {
		if n := flaky.extendFailures.Load(); n < 2 {
			return fmt.Errorf("%d failing passes, want 2", n)
		}
		return nil
	})
	// Every write of the Node up to now has been seen.
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return err
		}
		if seen := lastSeen.Load().(string); seen != node.ResourceVersion {
			return fmt.Errorf("the watch saw version %q of the Node, it is at %s", seen, node.ResourceVersion)
		}
		return nil
	})
	return dropped.Load()
}

// flakyLVM fails every extension of a volume group, as lvm2 fails to
// add a disk that is in use or failing.
type flakyLVM struct {
	lvm.Manager
	extendFailures atomic.Int32
}

func (f *flakyLVM) ExtendVolumeGroup(_ context.Context, name string, _ []string) error {
	f.extendFailures.Add(1)
	return fmt.Errorf("injected: the new disk cannot join volume group %s", name)
}
