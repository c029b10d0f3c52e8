package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Pause is a sandbox image: cmd/pause, built into bin.
func Pause(bin, ref string) Image {
	return Image{Ref: ref, Entrypoint: []string{"/pause"},
		Files: []File{{Path: "/pause", Source: filepath.Join(bin, "pause"), Mode: 0o755}}}
}

// BuildCommands builds the static programs the images hold, from the
// module at root into bin: cmd/pause and cmd/example-app. Go's build
// cache makes a rebuild of unchanged sources quick.
func BuildCommands(root, bin string) error {
	for _, name := range []string{"pause", "example-app"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, name), "./cmd/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building cmd/%s: %v: %s", name, err, out)
		}
	}
	return nil
}
