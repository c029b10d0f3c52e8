package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The example CI workflow stops a pull request that removes a PVC: its
// `strata plan` flags, run on such a change, exit non-zero.
func TestTheExampleWorkflowStopsAPVCRemoval(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "clusters", "ci", "strata-plan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	failOn := regexp.MustCompile(`--fail-on (\w+)`).FindStringSubmatch(string(data))
	format := regexp.MustCompile(`--format (\w+)`).FindStringSubmatch(string(data))
	if failOn == nil || format == nil {
		t.Fatal("the workflow's strata plan step has no --fail-on or --format")
	}

	dir := t.TempDir()
	files := map[string]string{
		"clusters/homelab/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  path: ./apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
		"apps/claim.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: apps\n" +
			"spec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n",
		"apps/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@strata.dev"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	git("rm", "-q", "apps/claim.yaml")
	git("commit", "-q", "-m", "the PR removes the claim")

	cmd := planCommand()
	cmd.SetArgs([]string{"--repo", dir, "--base", "main~1", "--head", "main", "--path", "./clusters/homelab",
		"--format", format[1], "--fail-on", failOn[1]})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if code := exitCode(cmd.Execute()); code == 0 {
		t.Fatalf("the workflow's plan (--fail-on %s) exits 0 on a PR that removes a PVC", failOn[1])
	}
}
