// Package process starts the local cluster's long-running programs in
// their own process groups, each with its output appended to a log file.
package process

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// OpenLog opens a log file for appending, making its directory.
func OpenLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// Start starts cmd in a process group of its own, so that a signal to the
// group reaches every child it forks, with its output in logPath.
func Start(cmd *exec.Cmd, logPath string) error {
	log, err := OpenLog(logPath)
	if err != nil {
		return err
	}
	defer log.Close() // the process has its own copy of the descriptor
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	return nil
}

// WaitAnswers waits up to timeout for url to answer 200 OK, as a program
// just started becomes ready; it kills and reaps cmd when it does not.
func WaitAnswers(ctx context.Context, cmd *exec.Cmd, url string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return err
}
