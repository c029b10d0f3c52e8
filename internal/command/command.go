// Package command runs the storage tools (lvm2, btrfs-progs, util-linux)
// as processes and turns their failures into errors that keep what the
// tool said.
package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/strata-gitops/strata/internal/confine"
)

// Runner runs a tool and returns its standard output; a failure is an
// *Error.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Confinable is a Runner that can confine what it runs (Exec, or a
// test's runner wrapping one).
type Confinable interface {
	Runner
	Confined(confine.Paths) Runner
}

// Exec runs tools as processes, in the C locale so that their messages
// read the same everywhere, with Env added to the environment.
type Exec struct {
	Env []string
	// Confine, when set, keeps the process to these paths and the
	// system's programs (confine.Start), on a kernel that enforces
	// Landlock; on one that does not, the process runs unconfined.
	Confine *confine.Paths
}

// Run implements Runner.
func (e Exec) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), e.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := e.start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
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
	return stdout.Bytes(), &Error{Args: append([]string{name}, args...), ExitCode: code, Stderr: stderr.String()}
}

// Confined is e, confined to p: the process gets p.Files as its
// descriptors 3 onward whether or not the kernel enforces Landlock.
func (e Exec) Confined(p confine.Paths) Runner {
	e.Confine = &p
	return e
}

func (e Exec) start(cmd *exec.Cmd) error {
	if e.Confine != nil {
		cmd.ExtraFiles = e.Confine.Files
	}
	if e.Confine == nil || confine.ABI() == 0 {
		return cmd.Start()
	}
	return confine.Start(cmd, *e.Confine)
}

// Error is a tool that failed; Stderr is kept for the user, not parsed.
type Error struct {
	Args     []string
	ExitCode int
	Stderr   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s failed (exit code %d): %s", strings.Join(e.Args, " "), e.ExitCode, strings.TrimSpace(e.Stderr))
}
