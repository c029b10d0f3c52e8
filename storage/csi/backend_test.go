package csi

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-gitops/strata/storage/csi/backend"
)

// listing is a backend that lists fixed volumes, or fails.
type listing struct {
	backend.Controller
	ids []string
	err error
}

func (l listing) Volumes(context.Context) ([]*csi.ListVolumesResponse_Entry, error) {
	var out []*csi.ListVolumesResponse_Entry
	for _, id := range l.ids {
		out = append(out, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: id}})
	}
	return out, l.err
}

// A backend that cannot be read hides nothing the others hold; only when
// none can be read is the listing an error, with the backend's code.
func TestListingDegradesPerBackend(t *testing.T) {
	ctx := context.Background()
	down := listing{err: status.Error(codes.Unavailable, "agent storage-1 is unreachable")}
	up := listing{ids: []string{"fast|pvc-1", "fast|pvc-2"}}
	got, err := listAll(ctx, []backend.Controller{up, down}, backend.Controller.Volumes)
	if err != nil || len(got) != 2 {
		t.Fatalf("listing with one backend down = %d entries, %v; want the other's 2", len(got), err)
	}
	if _, err := listAll(ctx, []backend.Controller{down, down}, backend.Controller.Volumes); status.Code(err) != codes.Unavailable {
		t.Fatalf("listing with every backend down = %v, want Unavailable", err)
	}
}
