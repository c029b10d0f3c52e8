package mountinfo

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/srv/a\040b`:         "/srv/a b",
		`/srv/tab\011x`:       "/srv/tab\tx",
		`/srv/back\134slash`:  `/srv/back\slash`,
		`/srv/plain`:          "/srv/plain",
		`/srv/trailing\04`:    `/srv/trailing\04`,
		`/srv/not\999octal`:   `/srv/not\999octal`,
		`/srv/two\040\040end`: "/srv/two  end",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// A real bind mount on a path with a space is found by its real path.
func TestReadFindsAMountWithASpace(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to bind-mount; CI runs as root")
		}
		t.Skip("needs root to bind-mount")
	}
	dir := filepath.Join(t.TempDir(), "a volume")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }()
	points, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		if p.MountPoint == dir {
			return
		}
	}
	t.Fatalf("the bind mount at %q is not in the mount table as read", dir)
}
