package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

type entry struct {
	name, link string
	kind       byte
	data       string
}

func tarball(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.kind, Linkname: e.link, Mode: 0o644, Size: int64(len(e.data))}
		if e.kind != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.kind == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// A layer or tarball from another party is hostile: a name that leaves
// the root is refused, links are left out, and the limits hold as it
// unpacks, not after.
func TestUnpackRefusesWhatLeavesTheRootOrTheLimits(t *testing.T) {
	files, err := Unpack(tarball(t,
		entry{name: "./apps/a.yaml", kind: tar.TypeReg, data: "a"},
		entry{name: "apps/link", kind: tar.TypeSymlink, link: "/etc/shadow"},
		entry{name: "apps/hard", kind: tar.TypeLink, link: "../../etc/shadow"},
	), Limits{File: 10, Artifact: 100})
	if err != nil || len(files) != 1 || files[0].Path != "apps/a.yaml" {
		t.Fatalf("Unpack = %+v, %v; want apps/a.yaml alone", files, err)
	}
	for name, c := range map[string]struct {
		entries []entry
		want    string
	}{
		"parent":   {[]entry{{name: "../escape.yaml", kind: tar.TypeReg, data: "x"}}, "outside the artifact's root"},
		"absolute": {[]entry{{name: "/etc/cron.d/x", kind: tar.TypeReg, data: "x"}}, "outside the artifact's root"},
		"file":     {[]entry{{name: "big", kind: tar.TypeReg, data: strings.Repeat("x", 11)}}, "over the limit of 10 per file"},
		"total": {[]entry{{name: "a", kind: tar.TypeReg, data: strings.Repeat("x", 10)}, {name: "b", kind: tar.TypeReg, data: strings.Repeat("x", 10)},
			{name: "c", kind: tar.TypeReg, data: "x"}}, "the limit per artifact"},
	} {
		if _, err := Unpack(tarball(t, c.entries...), Limits{File: 10, Artifact: 20}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Unpack error %v; want %q", name, err, c.want)
		}
	}
}
