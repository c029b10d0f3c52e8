package volumes

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// FuzzCheckName holds every accepted name to the layout's one promise:
// it names exactly one directory directly under its parent.
func FuzzCheckName(f *testing.F) {
	for _, seed := range []string{"db", "../x", "..", ".", "a/b", "a\x00", "snapshots", strings.Repeat("é", 70), "\u202e", "pvc-1234"} {
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
		if filepath.Dir(p) != base || filepath.Base(p) != name || strings.ContainsFunc(name, unicode.IsControl) || len(name) > MaxNameLength {
			t.Fatalf("CheckName accepted %q, which is not one plain directory under %s", name, base)
		}
	})
}
