// Package buildflags reads hack/build-flags: the go command's flags that
// every build of strata's own programs shares (`make build`, the
// release's images, hack/release run by `strata up`), so that one build's
// compile is the next one's, from the build cache.
package buildflags

import (
	"os"
	"path/filepath"
	"strings"
)

// File is the flags' file in a source tree.
const File = "hack/build-flags"

// Read returns the flags of the source tree at root; a tree without the
// file (an earlier release's) has none.
func Read(root string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, File))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var flags []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			flags = append(flags, strings.Fields(line)...)
		}
	}
	return flags, nil
}
