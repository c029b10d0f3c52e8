package imagejobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/app/imagejobs"
	"github.com/strata-gitops/strata/internal/testing/imageagent"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/provision"
)

func TestAJobIsWatchedToItsEnd(t *testing.T) {
	a := imageagent.Start(t, map[string]string{"vm": "token-of-the-vm-tenant-0123"})
	c := &volumeapi.Client{URL: a.Srv.URL, Token: "token-of-the-vm-tenant-0123"}
	ctx := context.Background()
	id, err := c.Provision(ctx, provision.Request{ImageURL: a.Image, VolumeName: "vm-1", VolumeSizeGB: 1, ImageType: "qcow2"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	j, err := imagejobs.Watch(ctx, c, id, &out, 20*time.Millisecond)
	if err != nil || j.Status != provision.Completed {
		t.Fatalf("Watch = %s, %v:\n%s", j.Status, err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "completed finalizing ") || !strings.Contains(last, "[####################] 100%") ||
		!strings.Contains(last, "volume vm-1 filled (image downloaded)") || len(lines) < 3 {
		t.Fatalf("the last line is %q:\n%s", last, out.String())
	}
	if _, err := c.Provision(ctx, provision.Request{ImageURL: a.Image, VolumeName: "vm-2", VolumeSizeGB: 0, ImageType: "qcow2"}); err == nil ||
		volumeapi.StatusOf(err) != 400 || !strings.Contains(err.Error(), "volume_size_gb 0") {
		t.Fatalf("a bad request: %v; want 400 with the old API's details", err)
	}
}

func TestTheLineShowsHowFarAJobIs(t *testing.T) {
	j := provision.Job{Status: provision.Running, Progress: provision.Progress{Stage: provision.Downloading, Percent: 45,
		BytesProcessed: 512 << 20, BytesTotal: 1 << 30}}
	if got, want := imagejobs.Line(j), "running   downloading     [#########-----------]  45%  512.0 MiB of 1024.0 MiB"; got != want {
		t.Errorf("Line = %q\nwant     %q", got, want)
	}
	j = provision.Job{Status: provision.Failed, Error: "volume vm-1 exists already", Progress: provision.Progress{Stage: provision.CreatingVolume, Percent: 60}}
	if got := imagejobs.Line(j); !strings.HasSuffix(got, " 60%  volume vm-1 exists already") {
		t.Errorf("Line = %q; want the error at its end", got)
	}
}
