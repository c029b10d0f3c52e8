package lvmbackend

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func mountAs(fstype string) []*csi.VolumeCapability {
	return []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fstype}}}}
}

// A claim smaller than its filesystem's least size gets a volume mkfs
// can format; one whose limit forbids that is refused, saying why.
func TestVolumeSizeMeetsTheFilesystemsMinimum(t *testing.T) {
	for _, c := range []struct {
		fstype      string
		required    int64
		limit       int64
		want        int64
		wantRefusal bool
	}{
		{"xfs", 64 << 20, 0, 300 << 20, false},
		{"xfs", 1 << 30, 0, 1 << 30, false},
		{"ext4", 64 << 20, 0, 64 << 20, false},
		{"", 5 << 20, 0, 8 << 20, false},
		{"xfs", 64 << 20, 128 << 20, 0, true},
	} {
		size, err := volumeSize(&csi.CapacityRange{RequiredBytes: c.required, LimitBytes: c.limit}, minimumSize(mountAs(c.fstype)))
		if c.wantRefusal {
			if status.Code(err) != codes.OutOfRange {
				t.Errorf("%s %d..%d: err %v, want OutOfRange", c.fstype, c.required, c.limit, err)
			}
			continue
		}
		if err != nil || size.Value() != c.want {
			t.Errorf("%s %d..%d: %d, %v; want %d", c.fstype, c.required, c.limit, size.Value(), err, c.want)
		}
	}
}
