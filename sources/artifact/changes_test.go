package artifact

import "testing"

// TestChangesTouchPaths: a changed file touches the directories above it;
// a changed path above a directory (a submodule that moved) touches it
// too; an unknown digest touches everything; a sibling with a common
// prefix is not touched.
func TestChangesTouchPaths(t *testing.T) {
	s := &Storage{}
	s.RecordChanges("sha256:new", "main@sha1:old", []string{"apps/web/cm.yaml", "vendor/lib"})
	for dir, want := range map[string]bool{
		"apps": true, "./apps/web": true, "apps/webhooks": false, "infra": false,
		"vendor/lib/deploy": true, "vendor": true, "vendor/library": false, "": true,
	} {
		if got := s.Touches("sha256:new", dir); got != want {
			t.Errorf("Touches(%q) = %v, want %v", dir, got, want)
		}
		if got := s.Untouched("sha256:new", "main@sha1:old", dir); got == want {
			t.Errorf("Untouched(%q) = %v, want %v", dir, got, !want)
		}
	}
	if !s.Touches("sha256:unknown", "infra") || s.Untouched("sha256:unknown", "main@sha1:old", "infra") {
		t.Error("an unknown digest is taken as touching nothing")
	}
	if s.Untouched("sha256:new", "main@sha1:other", "infra") {
		t.Error("changes recorded from another revision are taken as from this one")
	}
}
