package main

import (
	"io"
	"testing"

	"github.com/strata-gitops/strata/reconciler/plan"
)

// Usage errors exit 3, like every other error: exit 1 means "changes",
// and a CI gate must not read a mistyped flag as a plan.
func TestPlanUsageErrorsExitThree(t *testing.T) {
	for name, args := range map[string][]string{
		"no --base":       {"--repo", t.TempDir()},
		"an unknown flag": {"--base", "main", "--no-such-flag"},
		"an argument":     {"--base", "main", "main"},
	} {
		cmd := planCommand()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage = true
		err := cmd.Execute()
		if code := exitCode(err); code != plan.ExitError {
			t.Errorf("%s: exit %d (%v), want %d", name, code, err, plan.ExitError)
		}
	}
}
