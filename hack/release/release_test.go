package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/strata-gitops/strata/hack/debian"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// built is one release build of the work tree, shared by the tests.
var built struct {
	once   sync.Once
	dir    string
	digest v1.Hash
	err    error
}

// options builds the work tree's release into out, from the repository's
// lock, with the packages cached under bin/ across runs, signed with a
// key of the build's.
func options(out string) Options {
	root := testenv.RepoRoot()
	return Options{Version: "0.0.0-test", Repo: root, Lock: filepath.Join(root, "hack", "release", "packages.lock"),
		Cache: filepath.Join(root, "bin", "release", "cache"), Out: out, Epoch: time.Unix(1700000000, 0).UTC(),
		Key: filepath.Join(filepath.Dir(out), filepath.Base(out)+"-signing", "cosign.key")}
}

// releaseIndex is strata's image index in the release's layout.
func releaseIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	return indexNamed(t, dir, "strata:0.0.0-test")
}

// outerIndex is the release's layout's index and what it names.
func outerIndex(t *testing.T, dir string) (v1.ImageIndex, *v1.IndexManifest) {
	t.Helper()
	outer, err := layout.ImageIndexFromPath(filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return outer, m
}

// indexNamed is the index the release's layout names ref.
func indexNamed(t *testing.T, dir, ref string) v1.ImageIndex {
	t.Helper()
	outer, m := outerIndex(t, dir)
	for _, d := range m.Manifests {
		if d.Annotations[refName] == ref {
			idx, err := outer.ImageIndex(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return idx
		}
	}
	t.Fatalf("the layout names no index %s", ref)
	return nil
}

func release(t *testing.T) (string, v1.Hash) {
	t.Helper()
	testenv.NeedTools(t, "apt-get", "apt-cache", "dpkg-deb", "go")
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "strata-release-")
		if built.err == nil {
			built.digest, built.err = Build(context.Background(), options(built.dir))
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.digest
}

// TestMain removes the shared build, which outlives each test.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
		_ = os.RemoveAll(filepath.Dir(options(built.dir).Key))
	}
	os.Exit(code)
}

// Two builds of one commit give the same image index, byte for byte.
func TestTwoBuildsOfOneCommitAreTheSame(t *testing.T) {
	_, first := release(t)
	o := options(t.TempDir())
	o.Key = options(built.dir).Key // the same key: a signature is the same too
	again, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("two builds of one commit: index %s, then %s", first, again)
	}
	for _, f := range []string{"strata-0.0.0-test.tgz", "SHA256SUMS"} {
		a, errA := debian.FileSHA256(filepath.Join(built.dir, f))
		b, errB := debian.FileSHA256(filepath.Join(o.Out, f))
		if errA != nil || errB != nil || a != b {
			t.Fatalf("two builds of one commit: %s is %s, then %s (%v, %v)", f, a, b, errA, errB)
		}
	}
}
