// Package imagejobs is the CLI side of image jobs (`strata image`): it
// watches a job on an agent and shows its progress.
package imagejobs

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/provision"
)

// Watch asks the agent for the job every interval until it ends,
// printing a progress line whenever its state, stage or tenth of the
// way changes, and returns the ended job.
func Watch(ctx context.Context, c *volumeapi.Client, id string, out io.Writer, every time.Duration) (provision.Job, error) {
	last := ""
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		j, err := c.ImageJob(ctx, id)
		if err != nil {
			return j, fmt.Errorf("job %s: %w", id, err)
		}
		if key := fmt.Sprint(j.Status, j.Progress.Stage, j.Progress.Percent/10); key != last {
			fmt.Fprintln(out, Line(j))
			last = key
		}
		if j.Status == provision.Completed || j.Status == provision.Failed || j.Status == provision.Cancelled {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-tick.C:
		}
	}
}

// barCells is the progress bar's width.
const barCells = 20

// Line shows a job's progress: its state and stage, a bar, the percent,
// and the bytes downloaded; an ended job says how it ended.
func Line(j provision.Job) string {
	p := j.Progress
	filled := min(barCells, max(0, p.Percent*barCells/100))
	bar := "[" + strings.Repeat("#", filled) + strings.Repeat("-", barCells-filled) + "]"
	line := fmt.Sprintf("%-9s %-15s %s %3d%%", j.Status, p.Stage, bar, p.Percent)
	if p.BytesTotal > 0 {
		line += fmt.Sprintf("  %s of %s", mib(p.BytesProcessed), mib(p.BytesTotal))
	}
	switch j.Status {
	case provision.Completed:
		hit := "downloaded"
		if j.CacheHit {
			hit = "from the cache"
		}
		line += fmt.Sprintf("  volume %s filled (image %s)", j.Request.VolumeName, hit)
	case provision.Failed, provision.Cancelled:
		line += "  " + j.Error
	}
	return line
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
