package lease_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The watchdog fences once the Lease has gone After unrenewed, on its own
// clock, fences once per outage, and is disarmed by a renewal.
func TestSelfFenceAfterTheLeaseGoesUnrenewed(t *testing.T) {
	var fences atomic.Int32
	f := &lease.SelfFence{After: 300 * time.Millisecond, Fence: func(context.Context) error {
		fences.Add(1)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.Start(ctx) }()

	// Renewed often: no fence.
	renewUntil := time.Now().Add(time.Second)
	for time.Now().Before(renewUntil) {
		f.Renewed(time.Now(), true)
		time.Sleep(50 * time.Millisecond)
	}
	if n := fences.Load(); n != 0 {
		t.Fatalf("fenced %d times while the Lease was renewed", n)
	}
	// Renewals fail: one fence after After, however long it lasts.
	lost := time.Now()
	f.Renewed(time.Now(), false)
	testenv.Eventually(t, 5*time.Second, func() error {
		if fences.Load() != 1 {
			return fmt.Errorf("%d fences", fences.Load())
		}
		return nil
	})
	if since := time.Since(lost); since < 250*time.Millisecond {
		t.Fatalf("fenced %s after the last renewal, before After", since)
	}
	time.Sleep(time.Second) // a fenced watchdog must stay quiet; nothing to wait for
	if n := fences.Load(); n != 1 {
		t.Fatalf("fenced %d times in one outage", n)
	}
	// A renewal rearms it; the next outage fences again.
	f.Renewed(time.Now(), true)
	testenv.Eventually(t, 5*time.Second, func() error {
		if fences.Load() != 2 {
			return fmt.Errorf("%d fences", fences.Load())
		}
		return nil
	})
}

// A watchdog whose fence fails tries again.
func TestSelfFenceRetriesAFailedFence(t *testing.T) {
	var tries atomic.Int32
	f := &lease.SelfFence{After: 100 * time.Millisecond, Fence: func(context.Context) error {
		if tries.Add(1) < 3 {
			return fmt.Errorf("btrfs busy")
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.Start(ctx) }()
	testenv.Eventually(t, 5*time.Second, func() error {
		if tries.Load() < 3 {
			return fmt.Errorf("%d tries", tries.Load())
		}
		return nil
	})
}

// The agent and the controller count from one clock reading: the
// RenewTime the agent wrote. A renewal whose call returned late does not
// move the agent's deadline past the controller's, and the Lease says
// how long the agent takes, so the controller can check its own wait.
func TestTheFenceCountsFromTheRenewTimeItPublishes(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := fmt.Sprintf("lease-%d", os.Getpid())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	after := 400 * time.Millisecond
	var fencedAt atomic.Int64
	f := &lease.SelfFence{After: after, Fence: func(context.Context) error {
		fencedAt.CompareAndSwap(0, time.Now().UnixNano())
		return nil
	}}
	beatCtx, stopBeating := context.WithCancel(ctx)
	h := &lease.Heartbeat{Client: env.Client, Namespace: ns, Node: "n1", Period: 100 * time.Millisecond, SelfFenceAfter: after, Renewed: f.Renewed}
	fenceCtx, stopFence := context.WithCancel(ctx)
	defer stopFence()
	go func() { _ = f.Start(fenceCtx) }()
	go func() { _ = h.Start(beatCtx) }()
	l := &coordinationv1.Lease{}
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease.Name("n1")}, l); err != nil {
			return err
		}
		if published, ok := lease.SelfFenceAfter(l); !ok || published != after {
			return fmt.Errorf("the Lease publishes %v, %v; want %s", published, ok, after)
		}
		return nil
	})
	stopBeating()
	testenv.Eventually(t, 10*time.Second, func() error {
		if fencedAt.Load() == 0 {
			return fmt.Errorf("not fenced yet")
		}
		return nil
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease.Name("n1")}, l); err != nil {
		t.Fatal(err)
	}
	took := time.Unix(0, fencedAt.Load()).Sub(l.Spec.RenewTime.Time)
	if took < after || took > lease.FencedBy(after) {
		t.Fatalf("fenced %s after the last RenewTime; want between %s and FencedBy %s", took, after, lease.FencedBy(after))
	}
}

// A renewal whose call returned long after its RenewTime counts from the
// RenewTime: the agent's deadline is not pushed back by a slow API.
func TestASlowRenewalCountsFromItsRenewTime(t *testing.T) {
	var fences atomic.Int32
	f := &lease.SelfFence{After: time.Second, Fence: func(context.Context) error {
		fences.Add(1)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.Start(ctx) }()
	f.Renewed(time.Now().Add(-time.Second), true) // stamped a second ago, returned now
	testenv.Eventually(t, 500*time.Millisecond, func() error {
		if fences.Load() != 1 {
			return fmt.Errorf("%d fences", fences.Load())
		}
		return nil
	})
}
