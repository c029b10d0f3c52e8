// Package benchstat summarises what the benchmarks under hack/ measure:
// timings, and a process's peak memory.
package benchstat

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of d;
// d itself is left as it was.
func Percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	idx := (len(s)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return s[idx]
}

// PeakRSS reads a process's high-water mark of resident memory, in
// bytes; 0 when it cannot be read.
func PeakRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(rest, "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
