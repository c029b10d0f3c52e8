package lvm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
)

// Runner runs a tool and returns its standard output; a failure is a
// *CommandError.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Exec runs tools as processes.
type Exec struct{}

// Run implements Runner.
func (Exec) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	// lvm2 complains on stderr about every descriptor it inherits.
	cmd.Env = append(os.Environ(), "LVM_SUPPRESS_FD_WARNINGS=1", "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	code := -1
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		stderr.WriteString(err.Error())
	}
	return stdout.Bytes(), &CommandError{Args: append([]string{name}, args...), ExitCode: code, Stderr: stderr.String()}
}
