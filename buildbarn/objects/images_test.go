package objects

import (
	"strings"
	"testing"
)

// Images are pinned: a repository takes the release as its tag, a pinned
// reference is kept, and :latest or nothing to pin with is refused.
func TestResolveImage(t *testing.T) {
	for _, tc := range []struct {
		image, release, repository string
		want                       Image
		refused                    string
	}{
		{"", "r1", "mirror.test/bb", Image{"mirror.test/bb/bb-storage:r1", "r1"}, ""},
		{"mirror.test:5000/bb-storage", "r1", "", Image{"mirror.test:5000/bb-storage:r1", "r1"}, ""},
		{"mirror.test/bb-storage:t2", "", "", Image{"mirror.test/bb-storage:t2", "t2"}, ""},
		{"mirror.test/bb-storage:t2", "r1", "", Image{"mirror.test/bb-storage:t2", "r1"}, ""},
		{"mirror.test/bb-storage@sha256:0123456789abcdef0123", "", "", Image{"mirror.test/bb-storage@sha256:0123456789abcdef0123", "0123456789ab"}, ""},
		{"mirror.test/bb-storage:latest", "r1", "", Image{}, ":latest is refused"},
		{"mirror.test:5000/bb-storage", "", "", Image{}, "has no tag and spec.release is empty"},
		{"", "latest", "mirror.test/bb", Image{}, "spec.release latest, which is not pinned"},
		{"mirror.test/bb-storage", "latest", "", Image{}, "spec.release latest, which is not pinned"},
		{"", "r1", "", Image{}, "--buildbarn-image-repository"},
	} {
		got, err := ResolveImage("spec.image", tc.image, tc.release, tc.repository, StorageImage)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("ResolveImage(%q, %q, %q) = %v, %v; want refused with %q", tc.image, tc.release, tc.repository, got, err, tc.refused)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolveImage(%q, %q, %q) = %v, %v; want %v", tc.image, tc.release, tc.repository, got, err, tc.want)
		}
	}
}
