package qemuimg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// qcow2Header is what of a qcow2 header says whether the image reaches
// other files: a backing file's name and the external data file bit.
type qcow2Header struct {
	backingFile         string
	hasBackingFile      bool
	incompatibleFeature uint64
}

// qcow2 header fields: the magic, then big-endian version (4),
// backing_file_offset (8), backing_file_size (16); version 3 adds
// incompatible_features (72), whose bit 2 is an external data file.
const (
	qcow2Magic           = "QFI\xfb"
	qcow2HeaderV3Len     = 104
	incompatDataFile     = 1 << 2
	maxBackingNameLength = 1023
)

// readQcow2Header reads the header of the qcow2 image at path, or
// returns nil for a file that is not one.
func readQcow2Header(path string) (*qcow2Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the image: %w", err)
	}
	defer f.Close()
	buf := make([]byte, qcow2HeaderV3Len)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the image's header: %w", err)
	}
	if n < 72 || string(buf[:4]) != qcow2Magic {
		return nil, nil
	}
	h := &qcow2Header{}
	if off := binary.BigEndian.Uint64(buf[8:16]); off != 0 {
		name := make([]byte, min(binary.BigEndian.Uint32(buf[16:20]), maxBackingNameLength))
		n, _ := f.ReadAt(name, int64(off))
		h.hasBackingFile, h.backingFile = true, string(name[:n])
	}
	if version := binary.BigEndian.Uint32(buf[4:8]); version >= 3 && n >= 80 {
		h.incompatibleFeature = binary.BigEndian.Uint64(buf[72:80])
	}
	return h, nil
}

// selfContained refuses an image with a backing file or an external
// data file, naming it.
func (h *qcow2Header) selfContained() error {
	if h.hasBackingFile {
		return fmt.Errorf("the qcow2 image has a backing file %q; strata takes only self-contained images: flatten it (qemu-img convert -O qcow2)", h.backingFile)
	}
	if h.incompatibleFeature&incompatDataFile != 0 {
		return fmt.Errorf("the qcow2 image keeps its data in an external data file; strata takes only self-contained images: flatten it (qemu-img convert -O qcow2)")
	}
	return nil
}
