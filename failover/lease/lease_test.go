package lease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

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
		f.Renewed(true)
		time.Sleep(50 * time.Millisecond)
	}
	if n := fences.Load(); n != 0 {
		t.Fatalf("fenced %d times while the Lease was renewed", n)
	}
	// Renewals fail: one fence after After, however long it lasts.
	lost := time.Now()
	f.Renewed(false)
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
	f.Renewed(true)
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
