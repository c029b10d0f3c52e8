package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
	"github.com/strata-gitops/strata/hack/debian"
)

// sbomMediaType is a CycloneDX SBOM's, as an OCI artifact's layer.
const sbomMediaType = "application/vnd.cyclonedx+json"

// sbom is an image's bill of materials in CycloneDX: its program's Go
// modules, read from the binary's build information, and the Debian
// packages the image was built from, if any, each with its package URL; the Debian ones with
// the SHA-256 of their file. Its serial number and time come from what it
// describes, so that one commit gives one SBOM.
func sbom(name, version, arch string, binary []byte, pkgs []debian.Package, epoch time.Time) ([]byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return nil, fmt.Errorf("the build information of %s: %w", name, err)
	}
	components := []cdx.Component{}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		components = append(components, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: dep.Path, Version: dep.Version,
			BOMRef: "pkg:golang/" + dep.Path + "@" + dep.Version, PackageURL: "pkg:golang/" + dep.Path + "@" + dep.Version})
	}
	for _, p := range pkgs {
		purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", p.Name, p.Version, debArch(p))
		components = append(components, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: p.Name, Version: p.Version,
			BOMRef: purl, PackageURL: purl, Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: p.SHA256}}})
	}
	sum := sha256.Sum256(append([]byte(name+"/"+version+"/"+arch+"/"), binary...))
	bom := cdx.NewBOM()
	bom.SerialNumber = uuid.NewSHA1(uuid.NameSpaceURL, sum[:]).URN()
	bom.Metadata = &cdx.Metadata{Timestamp: epoch.UTC().Format(time.RFC3339),
		Component: &cdx.Component{Type: cdx.ComponentTypeContainer, Name: name, Version: version, BOMRef: name + "-" + arch}}
	bom.Components = &components
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// debArch is the architecture a package's file is built for.
func debArch(p debian.Package) string {
	if len(p.Filename) > len("_all.deb") && p.Filename[len(p.Filename)-len("_all.deb"):] == "_all.deb" {
		return "all"
	}
	return p.Arch
}
