package btrfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// Receive makes the subvolume of a send stream read from r in dir, as
// `btrfs receive` does, named as the sent one was. btrfs marks it
// received and read-only only once the stream ends well. This
// btrfs-progs refuses a stream cut anywhere before its end command,
// older ones took one cut between two commands, so the caller still
// checks that the stream is whole before trusting the subvolume, and
// removes what a failed receive left in dir.
func Receive(ctx context.Context, r io.Reader, dir string) error {
	return stream(ctx, "receiving into "+dir, r, io.Discard, "receive", "-q", dir)
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
