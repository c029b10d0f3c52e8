package lvmbackend

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// extent is lvm2's default extent size; every size is a multiple.
const extent = 4 << 20

// filesystems are the fstypes a volume may be formatted with.
var filesystems = map[string]bool{"": true, "ext4": true, "xfs": true}

// checkCapabilities refuses what a node-local volume cannot be: shared
// between nodes, or formatted with a filesystem strata does not grow.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume capability is required")
	}
	switch mode := c.GetAccessMode().GetMode(); mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
	default:
		return status.Errorf(codes.InvalidArgument, "access mode %s: a %s volume lives on one node; use ReadWriteOnce or ReadOnlyMany on one node",
			mode, storagev1alpha1.CSIDriver)
	}
	switch {
	case c.GetBlock() != nil:
	case c.GetMount() != nil:
		if fs := c.GetMount().GetFsType(); !filesystems[fs] {
			return status.Errorf(codes.InvalidArgument, "fstype %q: use ext4 or xfs", fs)
		}
	default:
		return status.Error(codes.InvalidArgument, "volume capability has neither block nor mount access")
	}
	return nil
}

// minimumSizes are the smallest filesystems mkfs makes, by fstype: a
// volume for a smaller claim is made this large, as mkfs.xfs refuses
// anything under 300 MB.
var minimumSizes = map[string]int64{"xfs": 300 << 20}

// minimumSize is the smallest volume every capability can be formatted in.
func minimumSize(caps []*csi.VolumeCapability) int64 {
	var least int64
	for _, c := range caps {
		least = max(least, minimumSizes[c.GetMount().GetFsType()])
	}
	return least
}

// volumeSize is the size to give a volume: the required bytes (1 GiB when
// none), at least least, rounded up to whole extents, within the limit.
func volumeSize(r *csi.CapacityRange, least int64) (resource.Quantity, error) {
	want, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if want < 0 || limit < 0 {
		return resource.Quantity{}, status.Errorf(codes.InvalidArgument, "capacity range %v has a negative size", r)
	}
	if want == 0 {
		want = backend.DefaultSize
		if limit > 0 && limit < want {
			want = limit
		}
	}
	if want < least {
		if limit > 0 && limit < least {
			return resource.Quantity{}, status.Errorf(codes.OutOfRange,
				"capacity range: the limit of %d bytes is below the %d bytes its filesystem needs at least", limit, least)
		}
		want = least
	}
	size := (want + extent - 1) / extent * extent
	if limit > 0 && size > limit {
		return resource.Quantity{}, status.Errorf(codes.OutOfRange,
			"capacity range: %d bytes required, rounded to whole 4 MiB extents is %d, above the limit of %d", want, size, limit)
	}
	return *resource.NewQuantity(size, resource.BinarySI), nil
}
