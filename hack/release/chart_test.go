package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/internal/local/registry"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The release's chart says the release's version three times, as its
// version, its appVersion and its image's tag, and pulls the image by the
// index's digest; rendered, every strata container runs exactly that.
func TestTheChartNamesTheRelease(t *testing.T) {
	dir, digest := release(t)
	chart := filepath.Join(dir, "strata-0.0.0-test.tgz")
	out, err := testenv.Helm(t, "show", "chart", chart)
	if err != nil {
		t.Fatalf("helm show chart: %v: %s", err, out)
	}
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(out, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != "0.0.0-test" || meta.AppVersion != "0.0.0-test" {
		t.Fatalf("the chart is version %q, appVersion %q; want both the release's, 0.0.0-test", meta.Version, meta.AppVersion)
	}
	rendered, err := testenv.Helm(t, "template", "strata", chart, "--set", "image.repository=registry.test/strata", "--set", "csiSidecars.registry=registry.test",
		"--set", "snapshotController.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v: %s", err, rendered)
	}
	node, err := indexNamed(t, dir, "strata-node:0.0.0-test").Digest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"registry.test/strata:0.0.0-test@" + digest.String(): true, "registry.test/strata-node:0.0.0-test@" + node.String(): true}
	sidecars, err := readSidecars(filepath.Join(testenv.RepoRoot(), "hack", "sidecars.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sidecars {
		d, err := indexNamed(t, dir, c.name+":"+c.tag).Digest()
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("registry.test/%s:%s@%s", c.name, c.tag, d)] = true
	}
	images := regexp.MustCompile(`image: "?([^"\s]+)"?`).FindAllStringSubmatch(string(rendered), -1)
	seen := map[string]bool{}
	for _, m := range images {
		if !want[m[1]] {
			t.Fatalf("the rendered chart runs %s, which is not one of the release's images %v", m[1], want)
		}
		seen[m[1]] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("the rendered chart runs %v; want each of %v", seen, want)
	}
}

// A chart whose values name an image by another digest than the
// release's index fails verification, naming the image.
func TestAChartNamingAnotherDigestFails(t *testing.T) {
	dir, _ := release(t)
	tgz, err := os.ReadFile(filepath.Join(dir, "strata-0.0.0-test.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	_, m := outerIndex(t, dir)
	var indexes []v1.Descriptor
	for _, d := range m.Manifests {
		if d.MediaType == types.OCIImageIndex {
			indexes = append(indexes, d)
		}
	}
	if err := chartNamesImages(tgz, indexes); err != nil {
		t.Fatalf("the chart as built: %v", err)
	}
	for i, d := range indexes {
		if strings.HasPrefix(d.Annotations[refName], "csi-attacher:") {
			indexes[i].Digest.Hex = strings.Repeat("0", 64)
		}
	}
	if err := chartNamesImages(tgz, indexes); err == nil || !strings.Contains(err.Error(), "the chart names csi-attacher by") {
		t.Fatalf("a chart naming csi-attacher by another digest: %v", err)
	}
}

// A release pushed to a real registry (distribution's) is what users
// reach: cosign verifies strata's index, a sidecar's and the chart with
// the release's key, and refuses another key; Helm installs the chart
// from oci:// by version; each image lists its SBOM as a referrer.
func TestThePushedReleaseVerifiesWithCosign(t *testing.T) {
	bin := filepath.Join(testenv.RepoRoot(), "bin")
	for _, tool := range []string{"registry", "cosign"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			testenv.Unavailable(t, "bin/"+tool+" is not built: run hack/tools.sh "+tool)
		}
	}
	dir, _ := release(t)
	ctx := context.Background()
	addr := freeAddress(t)
	reg, err := registry.Start(ctx, filepath.Join(bin, "registry"), t.TempDir(), addr, filepath.Join(t.TempDir(), "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Process.Kill(); _ = reg.Wait() })
	if err := Push(ctx, dir, addr); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(filepath.Dir(options(dir).Key), "cosign.pub")
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := makeKey(other); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"strata/strata:0.0.0-test", "strata/csi-provisioner:v6.4.0", "charts/strata:0.0.0-test"} {
		if out, err := cosign(bin, pub, addr+"/"+ref); err != nil {
			t.Fatalf("cosign verify %s: %v\n%s", ref, err, out)
		}
		if out, err := cosign(bin, filepath.Join(filepath.Dir(other), "cosign.pub"), addr+"/"+ref); err == nil {
			t.Fatalf("cosign verify %s with another key passed:\n%s", ref, out)
		}
	}
	if out, err := testenv.Helm(t, "show", "chart", "oci://"+addr+"/charts/strata", "--version", "0.0.0-test", "--plain-http"); err != nil || !strings.Contains(string(out), "version: 0.0.0-test") {
		t.Fatalf("helm show chart from the registry: %v\n%s", err, out)
	}
	m, err := releaseIndex(t, dir).IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range m.Manifests {
		ref, err := name.NewDigest(addr+"/strata/strata@"+img.Digest.String(), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		referrers, err := remote.Referrers(ref)
		if err != nil {
			t.Fatal(err)
		}
		rm, err := referrers.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != sbomMediaType {
			t.Fatalf("the %s image's referrers are %+v; want its SBOM", img.Platform.Architecture, rm.Manifests)
		}
	}
}

func cosign(bin, pub, ref string) ([]byte, error) {
	return exec.Command(filepath.Join(bin, "cosign"), "verify", "--key", pub, "--insecure-ignore-tlog=true",
		"--allow-http-registry", "--allow-insecure-registry", ref).CombinedOutput()
}

// freeAddress is a loopback address no one listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
