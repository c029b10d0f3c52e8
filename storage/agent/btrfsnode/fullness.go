package btrfsnode

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-gitops/strata/storage/btrfs"
)

// ReasonBtrfsHostFull is the reason of the event on the node when the
// filesystem under the base passes the full threshold
// (docs/notifications.md).
const ReasonBtrfsHostFull = "BtrfsHostFull"

// Fullness tells, once per crossing, when the btrfs filesystem holding
// the volumes is fuller than a threshold: writes to every volume there
// are about to fail, whatever each one's quota says.
type Fullness struct {
	Base string
	// Percent is the threshold of used space; 0 takes 90.
	Percent float64
	// Every is how often the space is read; 0 takes 30 s.
	Every time.Duration
	// Notice records the event.
	Notice func(reason, message string)
	// Free reads size and free bytes; nil reads the filesystem
	// (btrfs.Free). Tests set it.
	Free func(path string) (size, free int64, err error)

	full bool
}

// Run reads the space every interval until ctx ends.
func (f *Fullness) Run(ctx context.Context) error {
	every := f.Every
	if every == 0 {
		every = 30 * time.Second
	}
	for {
		f.Check()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// Check reads the space once, and tells when it has just passed the
// threshold.
func (f *Fullness) Check() {
	read := f.Free
	if read == nil {
		read = btrfs.Free
	}
	size, free, err := read(f.Base)
	if err != nil || size <= 0 {
		return
	}
	limit := f.Percent
	if limit == 0 {
		limit = 90
	}
	used := 100 * float64(size-free) / float64(size)
	full := used >= limit
	if full && !f.full {
		f.Notice(ReasonBtrfsHostFull, fmt.Sprintf("the btrfs filesystem under %s is %.1f%% full (threshold %.0f%%), %d MiB free: writes to its volumes will fail; free space or grow the filesystem",
			f.Base, used, limit, free>>20))
	}
	f.full = full
}
