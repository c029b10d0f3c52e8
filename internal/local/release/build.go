package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-gitops/strata/internal/buildflags"
)

// Built is a release built by hack/release (docs/release.md): its folder
// and version.
type Built struct {
	Dir, Version string
	// root is the source tree it was built from, by its own hack/release;
	// tool is the tree whose hack/release pushes it: strata's as it runs.
	root, tool string
	// hostOnly builds images for this machine's architecture alone: the
	// source tree's own release, whose tool takes -arch. (An earlier
	// tree's tool may not.)
	hostOnly bool
}

// refName is the OCI layout's annotation naming each index NAME:TAG.
const refName = "org.opencontainers.image.ref.name"

// BuildLocal builds the release of the source tree at root, as `make
// release` does, once: its version is 0.0.0-dev. and the hash of the tree
// as it is (uncommitted changes included), and a release already under
// bin/release with that version is used as it is.
func BuildLocal(ctx context.Context, root string) (*Built, error) {
	tree, err := treeHash(ctx, root)
	if err != nil {
		return nil, err
	}
	b := &Built{Version: devPrefix + tree[:12], root: root, tool: root, hostOnly: true}
	b.Dir = filepath.Join(root, "bin", "release", b.Version)
	if _, err := os.Stat(filepath.Join(b.Dir, "SHA256SUMS")); err == nil {
		return b, nil
	}
	if err := b.build(ctx); err != nil {
		return b, err
	}
	return b, pruneDev(filepath.Dir(b.Dir), keepDev)
}

// devPrefix begins the version of every release of a source tree; each is
// about 400 MB, so only the keepDev newest are kept: a test run beside
// another (two worktrees sharing bin/) still finds its own.
const (
	devPrefix = "0.0.0-dev."
	keepDev   = 3
)

// pruneDev removes all but the keep newest releases of source trees.
func pruneDev(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type dev struct {
		path string
		at   int64
	}
	var devs []dev
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() && strings.HasPrefix(e.Name(), devPrefix) && filepath.Ext(e.Name()) != ".partial" {
			devs = append(devs, dev{filepath.Join(dir, e.Name()), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].at > devs[j].at })
	for _, d := range devs[min(keep, len(devs)):] {
		if err := os.RemoveAll(d.path); err != nil {
			return err
		}
	}
	return nil
}

// BuildAt builds the release of another source tree (a worktree of an
// earlier commit), with its own hack/release, under dir; the tree at
// tool pushes it.
func BuildAt(ctx context.Context, root, tool, version, dir string) (*Built, error) {
	b := &Built{Dir: dir, Version: version, root: root, tool: tool}
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err == nil {
		return b, nil
	}
	return b, b.build(ctx)
}

// build writes the release into a folder beside its own and renames it
// into place, so that a build cut short is never taken for a release.
func (b *Built) build(ctx context.Context) error {
	partial := b.Dir + ".partial"
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	args := []string{"build", "-version", b.Version, "-out", partial}
	if b.hostOnly {
		// The local cluster runs on this machine's architecture: the
		// other's images would never be pulled (make release and the
		// release's own tests build both).
		args = append(args, "-arch", runtime.GOARCH)
	}
	if err := releaseTool(ctx, b.root, args...); err != nil {
		return err
	}
	_ = os.RemoveAll(b.Dir)
	return os.Rename(partial, b.Dir)
}

// Push copies the release to a registry, HOST:PORT, and tags its example
// app LocalTag there: the example repository (clusters/homelab) names
// it so, the same whatever the release.
func (b *Built) Push(ctx context.Context, registry string) error {
	if err := releaseTool(ctx, b.tool, "push", "-version", b.Version, "-out", b.Dir, "-registry", registry); err != nil {
		return err
	}
	digest, err := b.Digest("example-app")
	if err != nil {
		return err
	}
	repo := registry + "/" + ImagePrefix + "/example-app"
	src, err := name.ParseReference(repo+"@"+digest, name.Insecure)
	if err != nil {
		return err
	}
	desc, err := remote.Get(src, remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading %s back: %w", src, err)
	}
	tag, err := name.NewTag(repo+":"+LocalTag, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Tag(tag, desc, remote.WithContext(ctx))
}

// LocalTag is the tag of the example app in the local cluster's registry.
const LocalTag = "local"

// releaseTool runs hack/release of the source tree at root, in it: its
// package cache and signing key are those under its bin/.
func releaseTool(ctx context.Context, root string, args ...string) error {
	// Run with the flags its images are built with, so that the packages
	// they share (the standard library among them) compile once.
	flags, err := buildflags.Read(root)
	if err != nil {
		return err
	}
	run := append(append([]string{"run"}, flags...), "./hack/release")
	cmd := exec.CommandContext(ctx, "go", append(run, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/release %s in %s: %w: %s", args[0], root, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Digest is the digest of the release's index of an image, by its name
// (strata, example-app, pause, csi-provisioner, ...).
func (b *Built) Digest(name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(b.Dir, "image", "index.json"))
	if err != nil {
		return "", err
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(b.Dir, "image", "index.json"), err)
	}
	for _, m := range index.Manifests {
		if n, _, ok := strings.Cut(m.Annotations[refName], ":"); ok && n == name {
			return m.Digest, nil
		}
	}
	return "", fmt.Errorf("the release %s has no image %s", b.Dir, name)
}

// Ref is an image of the release as the nodes pull it, by digest, from
// the registry they know as registryName.
func (b *Built) Ref(registryName, name string) (string, error) {
	digest, err := b.Digest(name)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s/%s@%s", registryName, ImagePrefix, name, digest), nil
}

// ImagePrefix is the folder of a registry the release's images are
// pushed under (hack/release push).
const ImagePrefix = "strata"

// treeHash is a hash of the source tree as it is: the commit's tree with
// every change and every file git does not ignore, read into a scratch
// index so that the repository's own is left alone.
func treeHash(ctx context.Context, root string) (string, error) {
	scratch, err := os.MkdirTemp("", "strata-tree-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	env := append(os.Environ(), "GIT_INDEX_FILE="+filepath.Join(scratch, "index"))
	for _, args := range [][]string{{"read-tree", "HEAD"}, {"add", "-A", "."}} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = root, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s in %s: %w: %s", args[0], root, err, out)
		}
	}
	cmd := exec.CommandContext(ctx, "git", "write-tree")
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git write-tree in %s: %w", root, err)
	}
	sum := sha256.Sum256(out)
	return hex.EncodeToString(sum[:]), nil
}

// Previous builds the release an upgrade starts from: that of the tag
// before the source tree's commit (the newest tag vX.Y.Z reachable from
// HEAD^), or, with no tag, that of the merge base with main, versioned
// 0.0.0-base.COMMIT. It is built with that commit's own hack/release in a
// scratch worktree whose bin/ is root's, so that the package cache, the
// sidecars and the signing key are shared, and kept under
// bin/release/previous-VERSION-COMMIT, built once.
func Previous(ctx context.Context, root string) (*Built, error) {
	commit, version, err := previousCommit(ctx, root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "bin", "release", "previous-"+version+"-"+commit[:12])
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err == nil {
		return &Built{Dir: dir, Version: version, root: root, tool: root}, nil
	}
	scratch, err := os.MkdirTemp("", "strata-previous-")
	if err != nil {
		return nil, err
	}
	tree := filepath.Join(scratch, "tree")
	defer func() {
		_, _ = gitOutput(context.Background(), root, "worktree", "remove", "--force", tree)
		_ = os.RemoveAll(scratch)
	}()
	if _, err := gitOutput(ctx, root, "worktree", "add", "--detach", tree, commit); err != nil {
		return nil, err
	}
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(tree, "bin")); err != nil {
		return nil, err
	}
	b, err := BuildAt(ctx, tree, root, version, dir)
	if err != nil {
		return nil, fmt.Errorf("the release %s of commit %s: %w", version, commit, err)
	}
	b.root = root // the worktree goes; the release stays
	return b, nil
}

// previousCommit is the commit and version of the release an upgrade
// starts from.
func previousCommit(ctx context.Context, root string) (commit, version string, err error) {
	if tag, err := gitOutput(ctx, root, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD^"); err == nil {
		commit, err := gitOutput(ctx, root, "rev-list", "-n1", tag)
		return commit, strings.TrimPrefix(tag, "v"), err
	}
	for _, main := range []string{"origin/main", "main", "HEAD"} {
		if commit, err = gitOutput(ctx, root, "merge-base", "HEAD", main); err == nil {
			return commit, "0.0.0-base." + commit[:12], nil
		}
	}
	return "", "", err
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
