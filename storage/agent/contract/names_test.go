package contract

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheckName holds every accepted name to the layout's one promise:
// it names exactly one directory directly under its parent, in
// characters that need no quoting in an export block or mountinfo.
func FuzzCheckName(f *testing.F) {
	for _, seed := range []string{"db", "../x", "..", ".", "a/b", "a\x00", "snapshots", strings.Repeat("é", 70), "\u202e", "pvc-1234", `a"b`, "a b", "a;b}"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckName("volume", name)
		if err != nil {
			if KindOf(err) != Invalid || !strings.Contains(err.Error(), "volume name") {
				t.Fatalf("CheckName(%q) = %v, want an Invalid error that names the volume name", name, err)
			}
			return
		}
		base := "/srv/strata/tenant"
		p := filepath.Join(base, name)
		if filepath.Dir(p) != base || filepath.Base(p) != name || len(name) > MaxNameLength {
			t.Fatalf("CheckName accepted %q, which is not one plain directory under %s", name, base)
		}
		if strings.Trim(name, nameChars) != "" {
			t.Fatalf("CheckName accepted %q, which holds a character outside %s", name, nameChars)
		}
	})
}

// TestCheckNameRefusesWhatBreaksExportsAndMountinfo: each of these once
// passed and broke an export block, mountinfo matching or a command.
func TestCheckNameRefusesWhatBreaksExportsAndMountinfo(t *testing.T) {
	for _, name := range []string{`a"b`, `a\b`, "a b", "a;b", "a}b", "a\u202eb", "a\u200bb", "-rf", "é"} {
		if err := CheckName("volume", name); err == nil {
			t.Errorf("CheckName(%q) accepted it", name)
		}
	}
	for _, name := range []string{"pvc-0b9c1d2e", "db_1.backup+2", "snapshot-1"} {
		if err := CheckName("volume", name); err != nil {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}
