package up

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/local/objectstore"
)

// laterTree is a source tree whose hack/tools.sh runs script, and its
// bin/ folder.
func laterTree(t *testing.T, script string) Options {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hack", "tools.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return Options{Root: root, Bin: filepath.Join(root, "bin")}
}

// A tool that is missing is built by hack/tools.sh in the background,
// with its output in bin/build-logs; waiting for it says how long it
// took. One already there is not built again.
func TestALaterBuildRunsTheToolsScriptOnce(t *testing.T) {
	o := laterTree(t, "mkdir -p \"$(dirname \"$0\")/../bin\"\necho building \"$1\"\necho x >> \"$(dirname \"$0\")/../bin/$1\"\n")
	var said []string
	say := func(format string, args ...any) { said = append(said, format) }
	if err := buildLater(context.Background(), o, "minio").wait(context.Background(), say); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(o.Bin, "build-logs", "minio.log"))
	if err != nil || strings.TrimSpace(string(log)) != "building minio" {
		t.Fatalf("the build's log: %q, %v", log, err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "built beside the cluster's start") {
		t.Fatalf("said %q; want the build's time", said)
	}
	if err := buildLater(context.Background(), o, "minio").wait(context.Background(), say); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(o.Bin, "minio")); string(data) != "x\n" || len(said) != 1 {
		t.Fatalf("a tool already built was built again: %q, said %q", data, said)
	}
}

// A build that fails is an error naming the tool and its log.
func TestALaterBuildThatFailsNamesItsLog(t *testing.T) {
	o := laterTree(t, "echo 'no module' >&2\nexit 1\n")
	err := buildLater(context.Background(), o, "minio").wait(context.Background(), func(string, ...any) {})
	if err == nil || !strings.Contains(err.Error(), "building minio") || !strings.Contains(err.Error(), filepath.Join(o.Bin, "build-logs", "minio.log")) {
		t.Fatalf("%v; want an error naming minio and its log", err)
	}
}

// MinIO's build failing ends the watch of the example, which would wait
// for ever on the Bucket, with the build's error: serveLater passes it
// on, and the watch returns it in place of its cancellation.
func TestAFailedLaterBuildEndsTheWatch(t *testing.T) {
	o := laterTree(t, "exit 1\n")
	watch, fail := context.WithCancelCause(context.Background())
	defer fail(nil)
	built := buildLater(watch, o, "minio")
	stop := serveLater(func() (*objectstore.Server, error) {
		return nil, built.wait(context.Background(), func(string, ...any) {})
	}, fail)
	defer stop()
	select { // as watchProgress returns when its context ends
	case <-watch.Done():
	case <-time.After(time.Minute):
		t.Fatal("the failed build did not end the watch")
	}
	err := failedOr(watch, watch.Err())
	if err == nil || !strings.Contains(err.Error(), "building minio") {
		t.Fatalf("the watch ended with %v; want the build's error", err)
	}

	parent, cancel := context.WithCancel(context.Background())
	watch, fail = context.WithCancelCause(parent)
	defer fail(nil)
	cancel()
	if err := failedOr(watch, watch.Err()); !errors.Is(err, context.Canceled) {
		t.Fatalf("strata up stopped: %v; want its cancellation", err)
	}
}
