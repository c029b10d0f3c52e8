package release

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Only the newest releases of source trees are kept; other releases and
// builds in progress are left alone.
func TestPruneKeepsTheNewestDevReleases(t *testing.T) {
	dir := t.TempDir()
	names := []string{"0.0.0-dev.a", "0.0.0-dev.b", "0.0.0-dev.c", "0.0.0-dev.d", "0.0.0-dev.e.partial", "1.2.3", "previous-0.1.0-abc"}
	for i, n := range names {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		at := time.Unix(int64(1000+i), 0)
		if err := os.Chtimes(filepath.Join(dir, n), at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := pruneDev(dir, 2); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"0.0.0-dev.c", "0.0.0-dev.d", "0.0.0-dev.e.partial", "1.2.3", "previous-0.1.0-abc"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}
