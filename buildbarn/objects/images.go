package objects

import (
	"fmt"
	"strings"
)

// Image names of Buildbarn's programs, under an image repository.
const (
	StorageImage         = "bb-storage"
	SchedulerImage       = "bb-scheduler"
	WorkerImage          = "bb-worker"
	RunnerInstallerImage = "bb-runner-installer"
	BrowserImage         = "bb-browser"
	// VolumeInitImage makes a worker's directories; any image with a
	// POSIX shell does.
	VolumeInitImage = "busybox:1.36.1-uclibc"
)

// Image is a resolved container image and the release it is.
type Image struct {
	Ref, Version string
}

// ResolveImage pins the image in the spec's field. image may be empty
// (the repository's name), a repository (tagged with release), or a
// reference pinned by tag or digest. ":latest", or no tag and no
// release, is refused: pods would run whatever the registry serves that
// day.
func ResolveImage(field, image, release, repository, name string) (Image, error) {
	if image == "" {
		if repository == "" {
			return Image{}, fmt.Errorf("%s is empty and the controller has no --buildbarn-image-repository: set %s to %s's image, pinned by tag or digest", field, field, name)
		}
		image = strings.TrimSuffix(repository, "/") + "/" + name
	}
	if at := strings.Index(image, "@"); at >= 0 {
		version := release
		if version == "" {
			version = shortDigest(image[at+1:])
		}
		return Image{Ref: image, Version: version}, nil
	}
	repo, tag := splitTag(image)
	switch {
	case tag == "" && release == "latest":
		return Image{}, fmt.Errorf("%s %s would be tagged with spec.release latest, which is not pinned: set spec.release to a release's tag", field, image)
	case tag == "latest":
		return Image{}, fmt.Errorf("%s %s is not pinned: :latest is refused; use a release's tag or a digest", field, image)
	case tag == "" && release == "":
		return Image{}, fmt.Errorf("%s %s has no tag and spec.release is empty: pin a tag or digest, or set spec.release", field, image)
	case tag == "":
		return Image{Ref: repo + ":" + release, Version: release}, nil
	case release != "":
		return Image{Ref: image, Version: release}, nil
	}
	return Image{Ref: image, Version: tag}, nil
}

// splitTag splits a reference's tag off: the part after the last colon
// that comes after the last slash (a registry's port is not a tag).
func splitTag(ref string) (repo, tag string) {
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon > slash {
		return ref[:colon], ref[colon+1:]
	}
	return ref, ""
}

func shortDigest(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}
