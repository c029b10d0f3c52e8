package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imagePrefix is the repository folder the release's images go under
// in a registry: REGISTRY/strata/NAME. The chart goes to
// REGISTRY/charts/strata.
const imagePrefix = "strata"

// Push copies a built release to a registry, as it is in its layout:
// each image index by its tag, each SBOM by digest (the registry lists it
// as a referrer of its image), each signature by the tag cosign looks
// for, and the chart as Helm stores it, so that `helm install
// oci://REGISTRY/charts/strata --version VERSION` and `cosign verify`
// find everything. Digests do not change on the way.
func Push(ctx context.Context, dir, registry string) error {
	outer, err := layout.ImageIndexFromPath(filepath.Join(dir, "image"))
	if err != nil {
		return err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return err
	}
	// repositoryOf is where each pushed manifest's attachments go: the
	// repository of the index or chart they belong to.
	repositoryOf := map[v1.Hash]string{}
	var sboms, signatures []v1.Descriptor
	for _, d := range m.Manifests {
		ref := d.Annotations[refName]
		switch {
		case d.MediaType == types.OCIImageIndex:
			repo, tag, _ := strings.Cut(ref, ":")
			if err := pushIndex(ctx, outer, d, registry+"/"+imagePrefix+"/"+repo, tag, repositoryOf); err != nil {
				return err
			}
		case strings.HasPrefix(ref, chartRepository+":"):
			repo, tag, _ := strings.Cut(ref, ":")
			if err := pushImage(ctx, outer, d.Digest, registry+"/"+repo+":"+tag); err != nil {
				return err
			}
			repositoryOf[d.Digest] = registry + "/" + repo
		case strings.HasSuffix(ref, ".sig"):
			signatures = append(signatures, d)
		default:
			sboms = append(sboms, d)
		}
	}
	for _, d := range sboms {
		img, err := outer.Image(d.Digest)
		if err != nil {
			return err
		}
		sm, err := img.Manifest()
		if err != nil {
			return err
		}
		if sm.Subject == nil || repositoryOf[sm.Subject.Digest] == "" {
			return fmt.Errorf("the SBOM %s refers to no image of the release", d.Digest)
		}
		if err := pushImage(ctx, outer, d.Digest, repositoryOf[sm.Subject.Digest]+"@"+d.Digest.String()); err != nil {
			return err
		}
	}
	for _, d := range signatures {
		tag := d.Annotations[refName]
		signed, err := v1.NewHash(strings.Replace(strings.TrimSuffix(tag, ".sig"), "-", ":", 1))
		if err != nil || repositoryOf[signed] == "" {
			return fmt.Errorf("the signature %s signs nothing the release holds", tag)
		}
		if err := pushImage(ctx, outer, d.Digest, repositoryOf[signed]+":"+tag); err != nil {
			return err
		}
	}
	return nil
}

// pushIndex pushes an image index by its tag and notes its repository
// for its images and itself.
func pushIndex(ctx context.Context, outer v1.ImageIndex, d v1.Descriptor, repo, tag string, repositoryOf map[v1.Hash]string) error {
	idx, err := outer.ImageIndex(d.Digest)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(repo+":"+tag, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	repositoryOf[d.Digest] = repo
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, img := range im.Manifests {
		repositoryOf[img.Digest] = repo
	}
	return nil
}

func pushImage(ctx context.Context, outer v1.ImageIndex, digest v1.Hash, to string) error {
	img, err := outer.Image(digest)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(to, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
