package lvm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// script answers lvm2's report commands from canned JSON, as the real
// tools print it, and records every other command line: the logical-volume
// command lines cannot run on a kernel without device-mapper, so their
// exact arguments are what is tested here.
type script struct {
	vgs, pvs, lvs string
	ran           []string
}

func (s *script) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	if name == "lvm" && len(args) > 0 {
		switch args[0] {
		case "vgs":
			return []byte(s.vgs), nil
		case "pvs":
			return []byte(s.pvs), nil
		case "lvs":
			return []byte(s.lvs), nil
		}
	}
	s.ran = append(s.ran, strings.Join(append([]string{name}, args...), " "))
	return nil, nil
}

func report(kind string, rows ...string) string {
	return fmt.Sprintf(`  {
      "report": [
          {
              "%s": [
                  %s
              ]
          }
      ]
  }`, kind, strings.Join(rows, ",\n                  "))
}

func fixture() *script {
	return &script{
		vgs: report("vg", `{"vg_name":"vg1", "vg_size":"1073741824", "vg_free":"536870912", "vg_tags":"strata.dev/managed"}`),
		pvs: report("pv", `{"pv_name":"/dev/loop0", "vg_name":"vg1", "pv_size":"1073741824", "pv_free":"536870912"}`),
		lvs: report("lv",
			`{"lv_name":"pool", "vg_name":"vg1", "lv_size":"268435456", "lv_attr":"twi-aotz--", "pool_lv":"", "origin":"", "lv_tags":"", "data_percent":"12.50", "metadata_percent":"3.10", "lv_metadata_size":"4194304"}`,
			`{"lv_name":"thin", "vg_name":"vg1", "lv_size":"104857600", "lv_attr":"Vwi-aotz--", "pool_lv":"pool", "origin":"", "lv_tags":"a,b", "data_percent":"20.00", "metadata_percent":"", "lv_metadata_size":""}`,
			`{"lv_name":"thick", "vg_name":"vg1", "lv_size":"104857600", "lv_attr":"-wi-a-----", "pool_lv":"", "origin":"", "lv_tags":"", "data_percent":"", "metadata_percent":"", "lv_metadata_size":""}`),
	}
}

func TestLVM2CommandLines(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		do   func(m *LVM2) error
		want string
	}{
		{"pvcreate refuses prompts", func(m *LVM2) error { return m.CreatePhysicalVolume(ctx, "/dev/loop1") },
			"lvm pvcreate --config devices/hints=\"none\" -qq /dev/loop1"},
		{"vgcreate with tags", func(m *LVM2) error {
			return m.CreateVolumeGroup(ctx, "vg2", []string{"/dev/loop1", "/dev/loop2"}, []string{"strata.dev/managed"})
		}, "lvm vgcreate --config devices/hints=\"none\" --addtag strata.dev/managed vg2 /dev/loop1 /dev/loop2"},
		{"vgextend", func(m *LVM2) error { return m.ExtendVolumeGroup(ctx, "vg1", []string{"/dev/loop3"}) },
			"lvm vgextend --config devices/hints=\"none\" vg1 /dev/loop3"},
		{"thick volume", func(m *LVM2) error {
			return m.CreateVolume(ctx, "vg1", VolumeSpec{Name: "v", Size: 10 << 20, Tags: []string{"t"}})
		}, "lvm lvcreate --config devices/hints=\"none\" --name v --size 10485760b --wipesignatures y --yes --addtag t vg1"},
		{"thin pool", func(m *LVM2) error {
			return m.CreateThinPool(ctx, "vg1", ThinPoolSpec{Name: "p2", Size: 64 << 20, MetadataSize: 4 << 20, ChunkSize: 128 << 10})
		}, "lvm lvcreate --config devices/hints=\"none\" --type thin-pool --name p2 --size 67108864b --poolmetadatasize 4194304b --chunksize 131072b vg1"},
		{"thin volume", func(m *LVM2) error {
			return m.CreateVolume(ctx, "vg1", VolumeSpec{Name: "v", Size: 1 << 30, Pool: "pool"})
		}, "lvm lvcreate --config devices/hints=\"none\" --type thin --name v --virtualsize 1073741824b --thinpool pool vg1"},
		{"thin snapshot, active", func(m *LVM2) error { return m.CreateSnapshot(ctx, "vg1", "s", "thin", []string{"x"}) },
			"lvm lvcreate --config devices/hints=\"none\" --snapshot --name s --setactivationskip n --addtag x vg1/thin"},
		{"grow", func(m *LVM2) error { return m.ResizeVolume(ctx, "vg1", "thick", 200<<20) },
			"lvm lvextend --config devices/hints=\"none\" --size 209715200b vg1/thick"},
		{"grow pool metadata online", func(m *LVM2) error { return m.ExtendThinPool(ctx, "vg1", "pool", 0, 8<<20) },
			"lvm lvextend --config devices/hints=\"none\" --poolmetadatasize 8388608b vg1/pool"},
		{"remove", func(m *LVM2) error { return m.RemoveVolume(ctx, "vg1", "thick") },
			"lvm lvremove --config devices/hints=\"none\" --yes vg1/thick"},
		{"remove a group with its volumes and labels", func(m *LVM2) error { return m.RemoveVolumeGroup(ctx, "vg1") },
			"lvm vgremove --config devices/hints=\"none\" --force --yes vg1\nlvm pvremove --config devices/hints=\"none\" --yes /dev/loop0"},
		{"same size is no change", func(m *LVM2) error { return m.ResizeVolume(ctx, "vg1", "thick", 100<<20) }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fixture()
			if err := tc.do(&LVM2{Runner: s}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(s.ran, "\n"); got != tc.want {
				t.Errorf("ran %q, want %q", got, tc.want)
			}
		})
	}
}

// Refusals happen before any command runs.
func TestLVM2RefusesBeforeRunning(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		do   func(m *LVM2) error
		want error
	}{
		{"existing pv", func(m *LVM2) error { return m.CreatePhysicalVolume(ctx, "/dev/loop0") }, ErrExists},
		{"existing vg", func(m *LVM2) error { return m.CreateVolumeGroup(ctx, "vg1", []string{"/dev/loop1"}, nil) }, ErrExists},
		{"missing vg", func(m *LVM2) error { return m.ExtendVolumeGroup(ctx, "nope", []string{"/dev/loop1"}) }, ErrNotFound},
		{"no space", func(m *LVM2) error { return m.CreateVolume(ctx, "vg1", VolumeSpec{Name: "v", Size: 600 << 20}) }, ErrNoSpace},
		{"existing lv", func(m *LVM2) error { return m.CreateVolume(ctx, "vg1", VolumeSpec{Name: "thick", Size: 1}) }, ErrExists},
		{"pool that is thick", func(m *LVM2) error { return m.CreateVolume(ctx, "vg1", VolumeSpec{Name: "v", Size: 1, Pool: "thick"}) }, ErrNotFound},
		{"snapshot of thick", func(m *LVM2) error { return m.CreateSnapshot(ctx, "vg1", "s", "thick", nil) }, ErrNotThin},
		{"shrink", func(m *LVM2) error { return m.ResizeVolume(ctx, "vg1", "thick", 50<<20) }, ErrShrink},
		{"pool metadata shrink", func(m *LVM2) error { return m.ExtendThinPool(ctx, "vg1", "pool", 0, 1<<20) }, ErrShrink},
		{"pool with volumes", func(m *LVM2) error { return m.RemoveVolume(ctx, "vg1", "pool") }, ErrInUse},
		{"missing lv", func(m *LVM2) error { return m.RemoveVolume(ctx, "vg1", "gone") }, ErrNotFound},
		{"missing group", func(m *LVM2) error { return m.RemoveVolumeGroup(ctx, "nope") }, ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fixture()
			err := tc.do(&LVM2{Runner: s})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if len(s.ran) > 0 {
				t.Errorf("ran %q before refusing", s.ran)
			}
		})
	}
}

func TestLVM2ReadsReports(t *testing.T) {
	m := &LVM2{Runner: fixture()}
	lvs, err := m.LogicalVolumes(context.Background(), "vg1")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", lvs)
	want := fmt.Sprintf("%+v", []LogicalVolume{
		{Name: "pool", VolumeGroup: "vg1", Size: 268435456, Kind: ThinPool, DataPercent: 12.5, MetadataPercent: 3.1, MetadataSize: 4194304},
		{Name: "thin", VolumeGroup: "vg1", Size: 104857600, Kind: Thin, Pool: "pool", Tags: []string{"a", "b"}, DataPercent: 20},
		{Name: "thick", VolumeGroup: "vg1", Size: 104857600, Kind: Thick},
	})
	if got != want {
		t.Errorf("volumes\n%s\nwant\n%s", got, want)
	}
	vgs, err := m.VolumeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(vgs) != 1 || vgs[0].Free != 536870912 || !vgs[0].HasTag("strata.dev/managed") || vgs[0].Devices[0] != "/dev/loop0" {
		t.Errorf("groups %+v", vgs)
	}
}
