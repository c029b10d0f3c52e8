// Package benchstat summarises the timings the benchmarks under hack/
// take.
package benchstat

import (
	"slices"
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
