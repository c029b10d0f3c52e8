package nfs

import (
	"context"
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
	r := &recorder{table: `/srv/strata/a/one  127.0.0.1(sync,wdelay,hide,no_subtree_check,fsid=3,sec=sys,rw,secure,no_root_squash,no_all_squash)
/srv/strata/a/one  10.0.0.9(sync,wdelay,hide,no_subtree_check,fsid=3,sec=sys,rw,secure,no_root_squash,no_all_squash)
/srv/strata/a/gone  10.0.0.9(sync,fsid=4,rw)
/home/other  10.0.0.1(rw)
`}
	k := &Kernel{Root: "/srv/strata", Runner: r}
	have, err := k.Exported(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != 2 || have[0].ID != 3 || !slices.Equal(have[0].Clients, []string{"127.0.0.1", "10.0.0.9"}) {
		t.Fatalf("Exported = %+v, want the two exports under /srv/strata", have)
	}
	err = k.Sync(context.Background(), []Export{
		{ID: 3, Path: "/srv/strata/a/one", Pseudo: "/a/one", Clients: []string{"127.0.0.1", "10.0.0.7"}, UID: 1000, GID: 2000},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"exportfs -i -o rw,sync,secure,no_subtree_check,all_squash,anonuid=1000,anongid=2000,fsid=3 10.0.0.7:/srv/strata/a/one",
		"exportfs -u 10.0.0.9:/srv/strata/a/one",
		"exportfs -u 10.0.0.9:/srv/strata/a/gone",
	}
	if !slices.Equal(r.ran, want) {
		t.Fatalf("ran\n%s\nwant\n%s", strings.Join(r.ran, "\n"), strings.Join(want, "\n"))
	}
}
