package build

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
)

// Renderer identifies the program that renders: its VCS revision when the
// build recorded one, and its executable's size and modification time. A
// render recorded under another Renderer may differ from one made now
// (strata was upgraded), so it is made again. Empty when the executable
// cannot be read: then nothing may be taken as rendered before.
var Renderer = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	st, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	revision := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				revision += s.Value + " "
			}
		}
	}
	return fmt.Sprintf("%s%d %d", revision, st.Size(), st.ModTime().UnixNano())
})
