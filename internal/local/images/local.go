package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// References of the images the local cluster runs. The tag is fixed, not
// latest, so that the kubelet never tries to pull them.
const (
	PauseRef      = "strata.local/pause:local"
	ExampleAppRef = "strata.local/example-app:local"
)

// Pause is the pods' sandbox image: cmd/pause, built into bin.
func Pause(bin string) Image {
	return Image{Ref: PauseRef, Entrypoint: []string{"/pause"},
		Files: []File{{Path: "/pause", Source: filepath.Join(bin, "pause"), Mode: 0o755}}}
}

// ExampleApp is the example workload: cmd/example-app, built into bin.
func ExampleApp(bin string) Image {
	return Image{Ref: ExampleAppRef, Entrypoint: []string{"/example-app"},
		Files: []File{{Path: "/example-app", Source: filepath.Join(bin, "example-app"), Mode: 0o755},
			// The shell Buildbarn's volume-init runs: example-app stands
			// in for it (cmd/example-app/buildbarn.go).
			{Path: "/bin/sh", Source: filepath.Join(bin, "example-app"), Mode: 0o755},
			{Path: "/tmp/.keep", Data: nil}}}
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
