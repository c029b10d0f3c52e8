package nodecmd

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/imageagent"
)

// `strata image` fills a volume through an agent's image jobs and shows
// the job's progress, lists the jobs, and says what is missing.
func TestImageCommands(t *testing.T) {
	const token = "token-of-the-vm-tenant-0123"
	a := imageagent.Start(t, map[string]string{"vm": token})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	image := func(args ...string) (string, error) {
		cmd := Image()
		var out bytes.Buffer
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage = true
		err := cmd.Execute()
		return out.String(), err
	}
	agent := []string{"--agent", a.Srv.URL, "--token-file", tokenFile}
	out, err := image(append([]string{"provision", "--image-url", a.Image, "--volume", "vm-1", "--size-gb", "1"}, agent...)...)
	if err != nil || !strings.Contains(out, "[####################] 100%") || !strings.Contains(out, "volume vm-1 filled") {
		t.Fatalf("strata image provision: %v\n%s", err, out)
	}
	if out, err := image(append([]string{"jobs"}, agent...)...); err != nil || !strings.Contains(out, "vm-1") || !strings.Contains(out, "completed") {
		t.Fatalf("strata image jobs: %v\n%s", err, out)
	}
	_, err = image(append([]string{"provision", "--image-url", a.Image, "--volume", "vm-1", "--size-gb", "1"}, agent...)...)
	if err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a second job onto vm-1: %v; want it refused, the volume exists", err)
	}
	if _, err := image("jobs", "--agent", a.Srv.URL); err == nil || !strings.Contains(err.Error(), "no tenant token") {
		t.Fatalf("no token: %v", err)
	}
	if _, err := image("jobs", "--agent", a.Srv.URL, "--token-file", filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("a missing token file was taken")
	}
	t.Setenv("STRATA_AGENT_TOKEN", "a-wrong-token-0123456789")
	if _, err := image("jobs", "--agent", a.Srv.URL); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong token: %v", err)
	}
}
