package lvmbackend

import (
	"os"
	"path/filepath"
	"testing"
)

// The mount table names an lvm2 volume by its device-mapper node, the
// agent by the /dev/<vg>/<lv> link to it: they are one device.
func TestSameDevice(t *testing.T) {
	dir := t.TempDir()
	node, link, other := filepath.Join(dir, "dm-3"), filepath.Join(dir, "lv"), filepath.Join(dir, "dm-4")
	for _, f := range []string{node, other} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("dm-3", link); err != nil {
		t.Fatal(err)
	}
	if !sameDevice(link, node) || !sameDevice(node, node) {
		t.Error("a link and the node it names are not the same device")
	}
	if sameDevice(link, other) || sameDevice(filepath.Join(dir, "gone"), filepath.Join(dir, "gone-too")) {
		t.Error("different or missing devices count as one")
	}
}
