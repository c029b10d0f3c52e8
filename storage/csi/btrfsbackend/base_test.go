package btrfsbackend

import (
	"os"
	"path/filepath"
	"testing"
)

// A path in the agent's answer is bind-mounted from the host only when it
// is a volume's data directory under the agent's base: a forged answer
// must not mount /etc, or a link out of the base, into a pod.
func TestOnlyVolumesUnderTheBaseAreBindMounted(t *testing.T) {
	base := t.TempDir()
	volume := filepath.Join(base, "team-a", "db", "data")
	if err := os.MkdirAll(volume, 0o700); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(base, "team-a", "evil", "data")
	if err := os.MkdirAll(filepath.Dir(escape), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", escape); err != nil {
		t.Fatal(err)
	}
	if err := checkUnder(base, volume); err != nil {
		t.Fatalf("a volume under the base: %v", err)
	}
	for _, forged := range []string{"/etc", filepath.Join(base, "..", "etc", "data"), escape, filepath.Join(base, "team-a", "db"), base, "relative/data"} {
		if err := checkUnder(base, forged); err == nil {
			t.Errorf("checkUnder(%s) accepted it", forged)
		}
	}
}
