package csi

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-gitops/strata/storage/csi/backend"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// ListVolumes implements csi.ControllerServer: the volumes of both
// backends, ordered by ID.
func (c *Controller) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	entries, err := listAll(ctx, c.backends(), backend.Controller.Volumes)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b *csi.ListVolumesResponse_Entry) int {
		return strings.Compare(a.GetVolume().GetVolumeId(), b.GetVolume().GetVolumeId())
	})
	entries, next, err := page(entries, req.GetStartingToken(), req.GetMaxEntries(), "volumes")
	return &csi.ListVolumesResponse{Entries: entries, NextToken: next}, err
}

// ListSnapshots implements csi.ControllerServer: the snapshots of both
// backends, ordered by ID, or the one snapshot_id names, or those of
// source_volume_id. An ID that names nothing gives an empty list.
func (c *Controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	snaps, err := listAll(ctx, c.backends(), backend.Controller.Snapshots)
	if err != nil {
		return nil, err
	}
	snaps = slices.DeleteFunc(snaps, func(s *csi.Snapshot) bool {
		id, source := req.GetSnapshotId(), req.GetSourceVolumeId()
		return (id != "" && s.GetSnapshotId() != id) || (source != "" && s.GetSourceVolumeId() != source)
	})
	slices.SortFunc(snaps, func(a, b *csi.Snapshot) int { return strings.Compare(a.GetSnapshotId(), b.GetSnapshotId()) })
	snaps, next, err := page(snaps, req.GetStartingToken(), req.GetMaxEntries(), "snapshots")
	if err != nil {
		return nil, err
	}
	rsp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, s := range snaps {
		rsp.Entries = append(rsp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: s})
	}
	return rsp, nil
}

// listAll lists what every backend holds. A backend that cannot be read
// (an agent down) is left out and logged, so that it does not hide what
// the others hold; only when none can be read is the call an error.
func listAll[T any](ctx context.Context, backends []backend.Controller, list func(backend.Controller, context.Context) ([]T, error)) ([]T, error) {
	var all []T
	var errs []error
	for _, b := range backends {
		items, err := list(b, ctx)
		if err != nil {
			log.FromContext(ctx).Error(err, "listing one backend's volumes; the others are listed")
			errs = append(errs, err)
			continue
		}
		all = append(all, items...)
	}
	if len(errs) == len(backends) {
		return nil, errs[0] // a status, whose code the CO acts on
	}
	return all, nil
}

// page is the part of a sorted list a call asks for. The token is the
// index of the next entry; max 0 means all.
func page[T any](all []T, token string, max int32, what string) ([]T, string, error) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > len(all) {
			return nil, "", status.Errorf(codes.Aborted, "starting token %q is not one this driver gave for the %d %s there are", token, len(all), what)
		}
		start = n
	}
	if max < 0 {
		return nil, "", status.Errorf(codes.InvalidArgument, "max entries %d is negative", max)
	}
	end := len(all)
	if n := int(max); n > 0 && start+n < end {
		end = start + n
	}
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

// GetSnapshot implements csi.ControllerServer.
func (c *Controller) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := backend.Required("snapshot ID", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetSnapshotId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.GetSnapshot(ctx, id, req)
}
