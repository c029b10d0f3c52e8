package btrfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"unsafe"
)

// Send writes to w the stream `btrfs send` makes of the read-only
// subvolume snap: whole when parent is empty, otherwise only what changed
// since parent, a read-only subvolume the receiving side has a copy of
// (sent from it, or the one it was received from).
func Send(ctx context.Context, w io.Writer, snap, parent string) error {
	args := []string{"send", "-q"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	return stream(ctx, "sending "+snap, nil, w, append(args, snap)...)
}

// Confinement is what a received stream may make: one subvolume of an
// agreed name, from nothing or from an agreed parent, in bounded bytes.
type Confinement struct {
	// Name is the subvolume the stream makes in the receiving directory.
	Name string
	// Parent is the local read-only subvolume an incremental stream
	// builds on; empty for a whole stream.
	Parent string
	// MaxBytes bounds the stream; 0 is no bound.
	MaxBytes int64
}

// Receive makes the subvolume of a send stream read from r in dir, as
// `btrfs receive` does, confined: btrfs receive runs chrooted into dir,
// so no path, symbolic link or "..", of the stream or already in the
// parent, reaches past it, and the stream reaches it only through a
// check that refuses, before btrfs sees them, commands naming paths
// outside the subvolume, a subvolume other than c.Name, a parent or a
// clone source other than c.Parent (btrfs receive resolves those by
// UUID over the whole filesystem), clones through symbolic links in the
// parent, device nodes, and anything past c.MaxBytes. A refusal is
// returned as an error wrapping ErrStreamRefused.
//
// btrfs marks the subvolume received and read-only only once the stream
// ends well. The caller still checks that the stream is whole before
// trusting the subvolume, and removes what a failed receive left in dir.
func (f *Filesystem) Receive(ctx context.Context, r io.Reader, dir string, c Confinement) error {
	rules := streamRules{name: c.Name, maxBytes: c.MaxBytes, inUse: f.uuidInUse}
	if c.Parent != "" {
		info, err := subvolumeInfo(c.Parent)
		if err != nil {
			return err
		}
		rules.parent = info.identity()
		parent, err := os.Open(c.Parent)
		if err != nil {
			return err
		}
		defer parent.Close()
		rules.cloneSource = func(path string) error { return regularFileBeneath(parent, path) }
	}
	check := &streamCheck{r: r, rules: rules}
	err := stream(ctx, "receiving into "+dir, check, io.Discard, "receive", "-q", "--chroot", dir)
	if check.refusal != nil {
		return check.refusal
	}
	return err
}

// stream runs btrfs with r as its input and w as its output; the error
// says what it was doing and what btrfs printed.
func stream(ctx context.Context, what string, r io.Reader, w io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "btrfs", args...)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("btrfs %s: %w: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// SetReadOnly makes the subvolume at path read-only, or writable again,
// as `btrfs property set -ts PATH ro` does (BTRFS_IOC_SUBVOL_SETFLAGS). A
// read-only subvolume refuses new writes through every mount of it, bind
// mounts and NFS exports included; btrfs checks it when a file is
// opened, so files already open for writing are not stopped.
func (f *Filesystem) SetReadOnly(_ context.Context, path string, readOnly bool) error {
	flags, err := subvolumeFlags(path)
	if err != nil {
		return err
	}
	if readOnly {
		flags |= subvolReadOnly
	} else {
		flags &^= subvolReadOnly
	}
	if err := ioctl(path, iocSubvolSetFlags, unsafe.Pointer(&flags)); err != nil {
		return fmt.Errorf("making subvolume %s %s: %w", path, map[bool]string{true: "read-only", false: "writable"}[readOnly], err)
	}
	return nil
}

// ReadOnly says whether the subvolume at path is read-only. It is one
// ioctl, not a process: the volume API asks it of every pair it reports.
func (f *Filesystem) ReadOnly(_ context.Context, path string) (bool, error) {
	flags, err := subvolumeFlags(path)
	return flags&subvolReadOnly != 0, err
}

func subvolumeFlags(path string) (uint64, error) {
	var flags uint64
	if err := ioctl(path, iocSubvolGetFlags, unsafe.Pointer(&flags)); err != nil {
		return 0, fmt.Errorf("reading the flags of subvolume %s: %w", path, err)
	}
	return flags, nil
}

const (
	iocSubvolGetFlags = 0x80089419
	iocSubvolSetFlags = 0x4008941a
	subvolReadOnly    = 1 << 1
)
