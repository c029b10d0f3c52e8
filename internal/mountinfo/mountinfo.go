// Package mountinfo reads the mount table with its paths as they are on
// disk. The kernel writes a space, tab, new line or backslash in a path
// in mountinfo as an octal escape (\040); compared with a real path,
// an escaped one never matches, and whatever relies on the match (a
// bind mount made once, a volume found published) repeats or fails.
package mountinfo

import (
	"strconv"
	"strings"

	"k8s.io/mount-utils"
)

// Read returns the mounts of this process' mount namespace, with the
// mount point, root and source unescaped.
func Read() ([]mount.MountInfo, error) {
	points, err := mount.ParseMountInfo("/proc/self/mountinfo")
	for i := range points {
		points[i].MountPoint = Unescape(points[i].MountPoint)
		points[i].Root = Unescape(points[i].Root)
		points[i].Source = Unescape(points[i].Source)
	}
	return points, err
}

// Unescape turns each \ooo octal escape of mountinfo back into its byte.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			n, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(n))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return s[0] <= '3' // \377 is the largest byte
}
