package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-gitops/strata/plan"
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

func TestReadObjects(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "vars.yaml")
	if err := os.WriteFile(good, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: cluster-secrets\n  namespace: flux-system\nstringData:\n  token: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := readObjects(good)
	if err != nil || len(objs) != 2 {
		t.Fatalf("readObjects = %d objects, %v", len(objs), err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readObjects(bad); err == nil {
		t.Fatal("a Deployment in --substitute-from was accepted")
	}
}
