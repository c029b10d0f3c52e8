// Package process starts the local cluster's long-running programs in
// their own process groups, each with its output appended to a log file.
package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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
