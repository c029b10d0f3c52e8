// Package sopstest encrypts files with the real sops CLI (bin/sops,
// hack/tools.sh sops) for an age key made in the test, as users encrypt
// the files they keep in Git.
package sopstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Key is an age identity made for a test.
type Key struct {
	Identity  string // AGE-SECRET-KEY-1..., the Secret's *.agekey entry
	Recipient string // age1..., what files are encrypted for
}

// NewKey makes an age key.
func NewKey(t testing.TB) Key {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return Key{Identity: id.String(), Recipient: id.Recipient().String()}
}

// Encrypt encrypts a file's content with sops for the recipient, as
// `sops --encrypt --age RECIPIENT` does, the file's kind by its name
// (yaml, json, env, ini). YAML and JSON encrypt only data and stringData
// (--encrypted-regex), as Flux's docs tell users to, so the objects stay
// readable.
func Encrypt(t testing.TB, name, content, recipient string) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "sops")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "bin/sops is not built: run hack/tools.sh sops")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.Base(name))
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--encrypt", "--age", recipient}
	if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" || ext == ".json" {
		args = append(args, "--encrypted-regex", "^(data|stringData)$")
	}
	cmd := exec.Command(bin, append(args, path)...)
	cmd.Env = append(os.Environ(), "SOPS_DISABLE_VERSION_CHECK=1")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("sops --encrypt %s: %v: %s", name, err, strings.TrimSpace(stderr))
	}
	return string(out)
}
