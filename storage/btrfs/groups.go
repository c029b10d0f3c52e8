package btrfs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GroupID is a level-1 qgroup ("1/<id>"): a quota over several
// subvolumes at once, such as all of one tenant's.
type GroupID uint64

func (g GroupID) String() string { return fmt.Sprintf("1/%d", uint64(g)) }

// GroupFor is the level-1 qgroup of a name: a hash, so that it needs no
// state kept and is the same after a restart.
func GroupFor(name string) GroupID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return GroupID(h.Sum64()&(1<<47-1) | 1) // qgroup ids are 48 bits; never 0
}

// EnsureGroup makes the level-1 qgroup if it is missing and sets its
// limit on referenced bytes (0: no limit), through the ioctls `btrfs
// qgroup create` and `btrfs qgroup limit` issue: a tenant's first volume
// waits for this, and three processes took longer than the create.
func (f *Filesystem) EnsureGroup(_ context.Context, g GroupID, limit int64) error {
	if _, err := os.Stat(filepath.Join(f.qgroupDir(), fmt.Sprintf("1_%d", uint64(g)))); errors.Is(err, fs.ErrNotExist) {
		// struct btrfs_ioctl_qgroup_create_args: create (1) or remove, qgroupid.
		args := struct{ Create, QgroupID uint64 }{1, g.qgroupID()}
		if err := ioctl(f.Path, iocQgroupCreate, unsafe.Pointer(&args)); err != nil && !errors.Is(err, unix.EEXIST) {
			return f.qgroupError(fmt.Sprintf("creating qgroup %s", g), err)
		}
	}
	value := noLimit
	if limit > 0 {
		value = uint64(limit)
	}
	if err := limitQgroup(f.Path, g.qgroupID(), value); err != nil {
		return f.qgroupError(fmt.Sprintf("limiting qgroup %s to %d bytes", g, limit), err)
	}
	return nil
}

// qgroupError names the filesystem and says what to do about the
// kernel's answer to a qgroup ioctl, which alone is a bare errno.
func (f *Filesystem) qgroupError(action string, err error) error {
	var hint string
	switch {
	case errors.Is(err, unix.ENOTCONN):
		hint = fmt.Sprintf("quotas were turned off on it: run `btrfs quota enable %s` (the agent turns them on when it starts)", f.Path)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		hint = "managing quotas needs root (CAP_SYS_ADMIN): run the agent as root"
	default:
		hint = fmt.Sprintf("check `btrfs qgroup show %s` and the kernel log (dmesg) for errors of this filesystem", f.Path)
	}
	return fmt.Errorf("%s on %s: %w; %s", action, f.Path, err, hint)
}

// qgroupID is the group's ID as the kernel takes it: the level in the
// top 16 bits.
func (g GroupID) qgroupID() uint64 { return uint64(g) | 1<<48 }

// JoinGroup makes the subvolume at path a member of the level-1 qgroup,
// so that its bytes count against the group's limit too. Joining again
// is a no-op.
func (f *Filesystem) JoinGroup(ctx context.Context, path string, g GroupID) error {
	id, err := SubvolumeID(path)
	if err != nil {
		return err
	}
	_, err = f.Runner.Run(ctx, "btrfs", "qgroup", "assign", fmt.Sprintf("0/%d", id), g.String(), f.Path)
	if err != nil && !strings.Contains(err.Error(), "File exists") {
		return fmt.Errorf("adding subvolume %s to qgroup %s: %w", path, g, err)
	}
	return nil
}

var subvolumeLine = regexp.MustCompile(`(?m)^ID (\d+) .* path (.+)$`)

// Nested lists the subvolumes inside the subvolume at path, at any depth,
// by their paths: made by whoever writes into it, they are not under its
// quota.
func (f *Filesystem) Nested(ctx context.Context, path string) ([]string, error) {
	var found []string
	seen := map[string]bool{}
	queue := []string{path}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		out, err := f.Runner.Run(ctx, "btrfs", "subvolume", "list", "-o", dir)
		if err != nil {
			return nil, fmt.Errorf("listing the subvolumes in %s: %w", dir, err)
		}
		for _, m := range subvolumeLine.FindAllStringSubmatch(string(out), -1) {
			// The path is from the filesystem's top; the part below dir is
			// what matters, and it ends the same way.
			nested, ok := below(dir, m[2])
			if !ok || seen[nested] {
				continue
			}
			seen[nested] = true
			found = append(found, nested)
			queue = append(queue, nested)
		}
	}
	return found, nil
}

// below finds, for a path from the filesystem's top, the same subvolume
// under dir, by the longest suffix of dir the path continues.
func below(dir, fromTop string) (string, bool) {
	parts := strings.Split(strings.Trim(dir, "/"), "/")
	for i := range parts {
		prefix := strings.Join(parts[i:], "/") + "/"
		if rest, ok := strings.CutPrefix(fromTop, prefix); ok {
			return dir + "/" + rest, true
		}
	}
	return "", false
}
