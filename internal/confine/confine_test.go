package confine_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/confine"
)

// A confined process reads and writes only what it is given: another
// file beside them, or a host file, is refused by the kernel.
func TestAConfinedProcessReachesOnlyItsPaths(t *testing.T) {
	if confine.ABI() == 0 {
		t.Fatal(confine.ErrUnavailable) // every kernel strata is tested on has it
	}
	dir := t.TempDir()
	in, out, other := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "other")
	for _, f := range []string{in, out, other} {
		if err := os.WriteFile(f, []byte("data of "+filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(script string) (string, error) {
		cmd := exec.Command("sh", "-c", script)
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		if err := confine.Start(cmd, confine.Paths{Read: []string{in}, Write: []string{out}}); err != nil {
			return "", err
		}
		err := cmd.Wait()
		return output.String(), err
	}
	if got, err := run("cat " + in + " > " + out + " && cat " + out); err != nil || got != "data of in" {
		t.Fatalf("reading its input and writing its output: %q, %v", got, err)
	}
	for _, script := range []string{"cat " + other, "cat /etc/hostname", "echo x > " + other, "echo x > " + in, "ls " + dir} {
		if got, err := run(script); err == nil || !strings.Contains(got, "Permission denied") {
			t.Errorf("%s in confinement: %q, %v; want it refused", script, got, err)
		}
	}
	if data, _ := os.ReadFile(other); string(data) != "data of other" {
		t.Errorf("the file beside them holds %q", data)
	}
}
