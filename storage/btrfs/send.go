package btrfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
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
// as `btrfs property set -ts PATH ro` does. A read-only subvolume refuses
// writes through every mount of it, bind mounts and NFS exports
// included, and through files already open for writing.
func (f *Filesystem) SetReadOnly(ctx context.Context, path string, readOnly bool) error {
	_, err := f.Runner.Run(ctx, "btrfs", "property", "set", "-ts", path, "ro", strconv.FormatBool(readOnly))
	return err
}

// ReadOnly says whether the subvolume at path is read-only.
func (f *Filesystem) ReadOnly(ctx context.Context, path string) (bool, error) {
	out, err := f.Runner.Run(ctx, "btrfs", "property", "get", "-ts", path, "ro")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(out)) == "ro=true", nil
}
