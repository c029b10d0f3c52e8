package buildflags_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/buildflags"
)

// The tree's flags are read without its comments, and `make build` passes
// the same ones with CGO_ENABLED=0, as the release does: otherwise the
// local release compiles strata a second time on a fresh machine.
func TestMakeBuildUsesTheSharedFlags(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	flags, err := buildflags.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(flags, "-trimpath") || slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "#") }) {
		t.Fatalf("flags %q: want -trimpath and no comment", flags)
	}
	out, err := exec.Command("make", "-n", "-C", root, "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v: %s", err, out)
	}
	cmd := string(out)
	if !strings.Contains(cmd, "CGO_ENABLED=0") || !strings.Contains(cmd, " build "+strings.Join(flags, " ")+" ") {
		t.Fatalf("make build runs\n%s\nwant CGO_ENABLED=0 and go build %s", cmd, strings.Join(flags, " "))
	}
}

func TestATreeWithoutTheFileHasNoFlags(t *testing.T) {
	flags, err := buildflags.Read(t.TempDir())
	if err != nil || flags != nil {
		t.Fatalf("%q, %v", flags, err)
	}
}
