package csi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// An informer that fails to start is an error at once, not a wait for a
// sync that cannot come.
func TestAnInformerThatFailsToStartIsAnError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failed := func(context.Context) error { return errors.New("informer already started") }
	never := func(ctx context.Context) bool { <-ctx.Done(); return false }
	err := startAndSync(ctx, failed, never)
	if err == nil || !strings.Contains(err.Error(), "informer already started") {
		t.Fatalf("startAndSync = %v, want the start error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("startAndSync waited for the context to end")
	}
	running := func(ctx context.Context) error { <-ctx.Done(); return nil }
	if err := startAndSync(ctx, running, func(context.Context) bool { return true }); err != nil {
		t.Fatalf("startAndSync of informers that sync = %v", err)
	}
}
