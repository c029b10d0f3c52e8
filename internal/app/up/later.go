package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// laterBuild is a tool the cluster does not need to become Ready, which
// make up's build plan leaves to strata up: it is built beside the
// cluster's start, while the nodes pull and start strata, and waited for
// only where it is used.
type laterBuild struct {
	tool, log string
	done      chan struct{}
	err       error
	took      time.Duration
}

// buildLater starts building tool (a name hack/tools.sh knows) into
// o.Bin unless it is there; its output goes to bin/build-logs/TOOL.log.
func buildLater(ctx context.Context, o Options, tool string) *laterBuild {
	b := &laterBuild{tool: tool, log: filepath.Join(o.Bin, "build-logs", tool+".log"), done: make(chan struct{})}
	if _, err := os.Stat(filepath.Join(o.Bin, tool)); err == nil {
		close(b.done)
		return b
	}
	go func() {
		defer close(b.done)
		began := time.Now()
		b.err = runLogged(ctx, b.log, "bash", filepath.Join(o.Root, "hack", "tools.sh"), tool)
		b.took = time.Since(began)
	}()
	return b
}

// runLogged runs a command with its output in log.
func runLogged(ctx context.Context, log, name string, args ...string) error {
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		return err
	}
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	return cmd.Run()
}

// wait waits for the build and says how long it took, if it ran.
func (b *laterBuild) wait(ctx context.Context, say func(string, ...any)) error {
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.err != nil {
		return fmt.Errorf("building %s: %w (its log: %s)", b.tool, b.err, b.log)
	}
	if b.took > 0 {
		say("%s built beside the cluster's start in %s", b.tool, b.took.Round(time.Second))
	}
	return nil
}

// failedOr is the error of the background step that ended ctx (its
// cause, given to the cancel function), else err.
func failedOr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		return cause
	}
	return err
}
