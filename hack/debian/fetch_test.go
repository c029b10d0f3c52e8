package debian

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A lock goes stale when Debian's security suite replaces a package: the
// build then takes the archive's current package, says which locked one
// is gone and how to refresh, and leaves nothing of the stale one.
func TestFetchFromAStaleLockTakesTheArchivesPackage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := APT{Arch: "amd64", Dir: t.TempDir()}
	roots := []string{"media-types"}
	current, err := a.Resolve(ctx, roots)
	if err != nil {
		t.Fatal(err)
	}
	stale := append([]Package(nil), current...)
	stale[0].Version, stale[0].SHA256 = "0.0-gone", strings.Repeat("0", 64)

	var said bytes.Buffer
	debs := t.TempDir()
	got, paths, err := a.Fetch(ctx, stale, roots, debs, &said, "go run ./refresh")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != current[0] {
		t.Fatalf("fetched %+v, want the archive's %+v", got, current)
	}
	if sum, err := FileSHA256(paths["media-types"]); err != nil || sum != current[0].SHA256 {
		t.Fatalf("%s: SHA-256 %s (%v), want %s", paths["media-types"], sum, err, current[0].SHA256)
	}
	for _, want := range []string{"media-types=0.0-gone", "go run ./refresh"} {
		if !strings.Contains(said.String(), want) {
			t.Errorf("the build said %q, want it to name %q", said.String(), want)
		}
	}

	said.Reset()
	got, _, err = a.Fetch(ctx, current, roots, debs, &said, "go run ./refresh")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != current[0] || said.Len() != 0 {
		t.Fatalf("a lock the archive serves: fetched %+v and said %q, want the lock and nothing", got, said.String())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(debs, ".download-*")); len(leftovers) > 0 {
		t.Fatalf("downloads left behind: %v", leftovers)
	}
}
