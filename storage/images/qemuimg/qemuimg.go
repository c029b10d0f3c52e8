// Package qemuimg converts VM disk images to raw with qemu-img (Debian's
// qemu-utils) and checks the result against the image.
package qemuimg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/command"
	"github.com/strata-gitops/strata/internal/confine"
)

// Formats are the image formats strata converts from.
const (
	QCOW2 = "qcow2"
	Raw   = "raw"
)

// Tool runs qemu-img.
type Tool struct {
	Runner command.Runner
}

// New runs qemu-img as a process, confined to the image and the volume
// of each call (confined).
func New() Tool { return Tool{Runner: command.Exec{}} }

// confined is the runner of one qemu-img call, which may read read and
// the open files files (its /dev/fd/3 onward) and nothing else of the
// host's files, where the kernel enforces Landlock: an image that names
// another file, or a bug in a format's driver, reaches no host file.
func (t Tool) confined(read []string, files ...*os.File) command.Runner {
	c, ok := t.Runner.(command.Confinable)
	if !ok {
		return t.Runner
	}
	return c.Confined(confine.Paths{Read: read, Files: files})
}

// handed is how qemu-img names the first file confined hands it: the
// volume is opened by the agent, which checked what it is, and qemu-img
// never resolves a path a tenant could have changed since.
const handed = "/dev/fd/3"

// Info is what qemu-img reads from an image's header.
type Info struct {
	Format string `json:"format"`
	// VirtualSize is the disk the image holds: what a volume needs.
	VirtualSize int64 `json:"virtual-size"`
	// BackingFile and a data file, which Inspect refuses.
	BackingFile    string `json:"backing-filename,omitempty"`
	FormatSpecific struct {
		Data struct {
			DataFile string `json:"data-file,omitempty"`
		} `json:"data"`
	} `json:"format-specific"`
}

// Inspect reads the image at path as the format it is declared to be,
// and refuses one whose header says another: a declared raw image that
// is really qcow2 would be copied as its container, not its disk; a
// declared qcow2 that is not one is no image at all. A qcow2 that names
// a backing file or an external data file is refused before qemu-img
// opens it: either would have qemu-img read a file of the host, chosen
// by whoever made the image, into the volume.
func (t Tool) Inspect(ctx context.Context, path, declared string) (Info, error) {
	if declared != QCOW2 && declared != Raw {
		return Info{}, fmt.Errorf("image format %q: use qcow2 or raw", declared)
	}
	header, err := readQcow2Header(path)
	if err != nil {
		return Info{}, err
	}
	switch {
	case declared == Raw && header != nil:
		return Info{}, fmt.Errorf("the image is declared raw, but its header says qcow2: declare its real format")
	case declared == QCOW2 && header == nil:
		return Info{}, fmt.Errorf("the image is declared qcow2, but it has no qcow2 header: declare its real format")
	case header != nil:
		if err := header.selfContained(); err != nil {
			return Info{}, err
		}
	}
	return t.info(ctx, path, declared)
}

func (t Tool) info(ctx context.Context, path, format string) (Info, error) {
	out, err := t.confined([]string{path}).Run(ctx, "qemu-img", "info", "--output=json", "-f", format, path)
	if err != nil {
		return Info{}, fmt.Errorf("reading the image: %w", err)
	}
	var i Info
	if err := json.Unmarshal(out, &i); err != nil {
		return Info{}, fmt.Errorf("qemu-img info of the image: %w", err)
	}
	if i.BackingFile != "" || i.FormatSpecific.Data.DataFile != "" {
		return Info{}, fmt.Errorf("the image names another file (backing file %q, data file %q): flatten it into one self-contained image (qemu-img convert -O qcow2)", i.BackingFile, i.FormatSpecific.Data.DataFile)
	}
	return i, nil
}

// source is how every qemu-img command that reads an image names it: as
// the declared format over a plain file, with no backing file whatever
// its header says, so that not even a header changed after Inspect
// leads qemu-img to another file.
func source(path, format string) (string, error) {
	opts := map[string]any{"driver": format, "file": map[string]string{"driver": "file", "filename": path}}
	if format == QCOW2 {
		opts["backing"] = nil
	}
	data, err := json.Marshal(opts)
	return "json:" + string(data), err
}

// Convert writes the disk of the image Inspect read, raw, over dst, an
// open file or block device (opened for reading and writing) at least
// the image's virtual size, or it is refused before anything is
// written. Past the image's end dst is zeroed, so that a volume that
// held other data before reads as the image's disk followed by zeros,
// as a new one does.
func (t Tool) Convert(ctx context.Context, src string, image Info, dst *os.File) error {
	size, err := dst.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if size < image.VirtualSize {
		return fmt.Errorf("the volume %s holds %d bytes, the image %s needs %d: make the volume at least that large", dst.Name(), size, src, image.VirtualSize)
	}
	from, err := source(src, image.Format)
	if err != nil {
		return err
	}
	if _, err := t.confined([]string{src}, dst).Run(ctx, "qemu-img", "convert", "-n", "-O", Raw, from, handed); err != nil {
		return fmt.Errorf("converting %s (%s) to raw on %s: %w", src, image.Format, dst.Name(), err)
	}
	if err := zeroFrom(dst, image.VirtualSize, size); err != nil {
		return fmt.Errorf("zeroing %s past the image's %d bytes: %w", dst.Name(), image.VirtualSize, err)
	}
	return nil
}

// zeroFrom zeroes f from off to its end, size: a file's blocks are
// punched out, a block device is asked to write zeros (BLKZEROOUT),
// which thin and loop devices do without writing the bytes.
func zeroFrom(f *os.File, off, size int64) error {
	if off >= size {
		return nil
	}
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeDevice == 0 {
		return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, size-off)
	}
	span := [2]uint64{uint64(off), uint64(size - off)}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&span))); errno != 0 {
		return errno
	}
	return nil
}

// Same reads dst back and checks it holds the image's disk: the bytes
// a VM would read, with anything beyond the image's size zero.
func (t Tool) Same(ctx context.Context, src, format string, dst *os.File) error {
	from, err := source(src, format)
	if err != nil {
		return err
	}
	_, err = t.confined([]string{src}, dst).Run(ctx, "qemu-img", "compare", "-F", Raw, from, handed)
	var failed *command.Error
	if errors.As(err, &failed) && failed.ExitCode == 1 {
		return fmt.Errorf("%s does not hold the image %s after the conversion: %s", dst.Name(), src, failed.Stderr)
	}
	if err != nil {
		return fmt.Errorf("comparing %s with the image %s: %w", dst.Name(), src, err)
	}
	return nil
}
