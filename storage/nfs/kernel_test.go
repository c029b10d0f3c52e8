package nfs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder answers `exportfs -s` with a fixed table and records every
// other command: the kernel server cannot run here, so its command lines
// are checked exactly.
type recorder struct {
	table string
	ran   []string
}

func (r *recorder) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	if line == "exportfs -s" {
		return []byte(r.table), nil
	}
	r.ran = append(r.ran, line)
	return nil, nil
}

func TestKernelSyncCommandLines(t *testing.T) {
	// Sync exports only folders that are there.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a", "one"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &recorder{table: strings.ReplaceAll(`/srv/strata/a/one  127.0.0.1(sync,wdelay,hide,no_subtree_check,fsid=3,sec=sys,rw,secure,no_root_squash,no_all_squash)
/srv/strata/a/one  10.0.0.9(sync,wdelay,hide,no_subtree_check,fsid=3,sec=sys,rw,secure,no_root_squash,no_all_squash)
/srv/strata/a/gone  10.0.0.9(sync,fsid=4,rw)
/home/other  10.0.0.1(rw)
`, "/srv/strata", root)}
	k := &Kernel{Root: root, Runner: r}
	have, err := k.Exported(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != 2 || have[1].ID != 3 || !slices.Equal(have[1].Clients, []string{"10.0.0.9", "127.0.0.1"}) || have[0].ID != 4 {
		t.Fatalf("Exported = %+v, want the two exports under the root, by path, each client sorted", have)
	}
	err = k.Sync(context.Background(), []Export{
		{ID: 3, Path: root + "/a/one", Pseudo: "/a/one", Clients: []string{"127.0.0.1", "10.0.0.7"}, UID: 1000, GID: 2000},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"exportfs -i -o rw,sync,secure,no_subtree_check,all_squash,anonuid=1000,anongid=2000,fsid=3 10.0.0.7:" + root + "/a/one",
		"exportfs -u 10.0.0.9:" + root + "/a/gone",
		"exportfs -u 10.0.0.9:" + root + "/a/one",
	}
	if !slices.Equal(r.ran, want) {
		t.Fatalf("ran\n%s\nwant\n%s", strings.Join(r.ran, "\n"), strings.Join(want, "\n"))
	}
}

// exportfs takes a path that is not there (with a warning), and the
// server would then serve whatever is mounted there later; it follows a
// link, so a volume's folder replaced by one would export what it points
// to. Each such export is refused before exportfs runs: a missing path,
// a link to the host's /etc, a folder below a link, a file, a path
// outside the root.
func TestKernelRefusesAnExportThatIsNotAFolderOfItsOwn(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"a/real", "b"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(root, "a", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "b", "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{filepath.Join(root, "a", "missing"), filepath.Join(root, "a", "link"),
		filepath.Join(root, "b", "up", "real"), filepath.Join(root, "a", "file"), t.TempDir()} {
		r := &recorder{}
		k := &Kernel{Root: root, Runner: r}
		err := k.Sync(context.Background(), []Export{{ID: 3, Path: bad, Pseudo: "/x", Clients: []string{"127.0.0.1"}}})
		if RefusedFor(err, bad) == nil || len(r.ran) != 0 {
			t.Fatalf("Sync of %s = %v, ran %q; want it refused and no exportfs", bad, err, r.ran)
		}
	}
}
