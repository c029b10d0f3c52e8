// Package blockdelta sends what changed between two states of a block
// device, and applies it to a copy of the older one: the LVM mover's
// stream (docs/failover.md). The sender reads its newest snapshot and the
// snapshot the receiver already holds side by side and writes only the
// chunks that differ; a chunk that became zeros is sent as a length, not
// as data. Without a base every chunk of the snapshot is sent, zeros as
// lengths, so the receiver's copy ends up equal whatever it held before.
//
// The stream is a header (magic, the device size, the chunk size), then
// records (kind, offset, length, and data for a data record), then an end
// record with the number of records before it. A stream cut anywhere
// lacks its end record, and Apply fails: the caller's copy is then
// partial and must not count as a replica.
package blockdelta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	magic = "SBD1"
	// DefaultChunk is the unit of comparison: a thin pool's default chunk
	// size, so a chunk the filesystem touched is about one the pool
	// allocated.
	DefaultChunk = 64 << 10
	// maxRecord bounds one record: adjacent changed chunks are sent as one
	// record up to this length.
	maxRecord = 4 << 20
	// readBlock is how much of each device is read at once.
	readBlock = 4 << 20
)

// Record kinds.
const (
	kindData byte = 'D'
	kindZero byte = 'Z'
	kindEnd  byte = 'E'
)

// Stats say what a stream held.
type Stats struct {
	// Size is the device's size.
	Size int64
	// Data are the bytes sent as data; Zeroed the bytes sent as zeros.
	Data, Zeroed int64
	// Records are the records before the end record.
	Records int64
}

// Diff writes the stream that turns base into next, both size bytes;
// base nil sends all of next. chunk is the unit of comparison
// (DefaultChunk when 0) and must divide the read block.
func Diff(w io.Writer, base, next io.ReaderAt, size int64, chunk int) (Stats, error) {
	if chunk == 0 {
		chunk = DefaultChunk
	}
	if chunk <= 0 || readBlock%chunk != 0 {
		return Stats{}, fmt.Errorf("chunk size %d does not divide %d", chunk, readBlock)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := writeHeader(bw, size, chunk); err != nil {
		return Stats{}, err
	}
	d := &differ{w: bw, stats: Stats{Size: size}}
	nextBuf, baseBuf := make([]byte, readBlock), make([]byte, readBlock)
	for off := int64(0); off < size; off += readBlock {
		n := int(min(readBlock, size-off))
		if err := readFull(next, nextBuf[:n], off); err != nil {
			return d.stats, fmt.Errorf("reading the new snapshot at %d: %w", off, err)
		}
		if base != nil {
			if err := readFull(base, baseBuf[:n], off); err != nil {
				return d.stats, fmt.Errorf("reading the base snapshot at %d: %w", off, err)
			}
		}
		for c := 0; c < n; c += chunk {
			end := min(c+chunk, n)
			cur := nextBuf[c:end]
			if base != nil && bytes.Equal(cur, baseBuf[c:end]) {
				continue
			}
			if err := d.add(off+int64(c), cur); err != nil {
				return d.stats, err
			}
		}
	}
	if err := d.flush(); err != nil {
		return d.stats, err
	}
	if err := writeRecord(bw, kindEnd, uint64(d.stats.Records), 0); err != nil {
		return d.stats, err
	}
	return d.stats, bw.Flush()
}

// differ gathers adjacent changed chunks of one kind into a record.
type differ struct {
	w       *bufio.Writer
	stats   Stats
	kind    byte
	offset  int64
	pending []byte // data of a pending data record
	length  int64  // length of the pending record
}

// add takes one changed chunk at off; a chunk of zeros is sent as its
// length only.
func (d *differ) add(off int64, chunk []byte) error {
	kind := kindData
	if isZero(chunk) {
		kind = kindZero
	}
	if d.length > 0 && (d.kind != kind || d.offset+d.length != off || d.length+int64(len(chunk)) > maxRecord) {
		if err := d.flush(); err != nil {
			return err
		}
	}
	if d.length == 0 {
		d.kind, d.offset = kind, off
	}
	if kind == kindData {
		d.pending = append(d.pending, chunk...)
	}
	d.length += int64(len(chunk))
	return nil
}

func (d *differ) flush() error {
	if d.length == 0 {
		return nil
	}
	if err := writeRecord(d.w, d.kind, uint64(d.offset), uint32(d.length)); err != nil {
		return err
	}
	if d.kind == kindData {
		if _, err := d.w.Write(d.pending); err != nil {
			return err
		}
		d.stats.Data += d.length
	} else {
		d.stats.Zeroed += d.length
	}
	d.stats.Records++
	d.pending, d.length = d.pending[:0], 0
	return nil
}

// Apply writes a stream onto target, a copy of the stream's base (or
// anything, for a stream without one) at least as large as the device
// the stream was made from. It returns once the end record is read; a
// stream that ends before it, or names bytes outside the device, is an
// error, and target is then partial.
func Apply(r io.Reader, target io.WriterAt, targetSize int64) (Stats, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	size, _, err := readHeader(br)
	if err != nil {
		return Stats{}, err
	}
	if size > targetSize {
		return Stats{}, fmt.Errorf("the stream is of a %d-byte device; the target has %d bytes: grow it first", size, targetSize)
	}
	stats := Stats{Size: size}
	buf := make([]byte, maxRecord)
	for {
		kind, off, length, err := readRecord(br)
		if err != nil {
			return stats, err
		}
		if kind == kindEnd {
			if off != uint64(stats.Records) {
				return stats, fmt.Errorf("the stream's end says %d records; %d arrived", off, stats.Records)
			}
			return stats, nil
		}
		if length > maxRecord || off > uint64(size) || uint64(length) > uint64(size)-off {
			return stats, fmt.Errorf("a record of %d bytes at %d is outside the %d-byte device", length, off, size)
		}
		data := buf[:length]
		switch kind {
		case kindData:
			if _, err := io.ReadFull(br, data); err != nil {
				return stats, fmt.Errorf("the stream ended inside a record at %d: %w", off, unexpected(err))
			}
			stats.Data += int64(length)
		case kindZero:
			clear(data)
			stats.Zeroed += int64(length)
		default:
			return stats, fmt.Errorf("unknown record kind %q at %d", kind, off)
		}
		if _, err := target.WriteAt(data, int64(off)); err != nil {
			return stats, fmt.Errorf("writing %d bytes at %d: %w", length, off, err)
		}
		stats.Records++
	}
}

func writeHeader(w io.Writer, size int64, chunk int) error {
	var h [16]byte
	copy(h[:4], magic)
	binary.BigEndian.PutUint64(h[4:12], uint64(size))
	binary.BigEndian.PutUint32(h[12:16], uint32(chunk))
	_, err := w.Write(h[:])
	return err
}

func readHeader(r io.Reader) (size int64, chunk int, err error) {
	var h [16]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, fmt.Errorf("reading the stream's header: %w", unexpected(err))
	}
	if string(h[:4]) != magic {
		return 0, 0, fmt.Errorf("not a block delta stream (it starts %q, not %q)", h[:4], magic)
	}
	return int64(binary.BigEndian.Uint64(h[4:12])), int(binary.BigEndian.Uint32(h[12:16])), nil
}

func writeRecord(w io.Writer, kind byte, off uint64, length uint32) error {
	var h [13]byte
	h[0] = kind
	binary.BigEndian.PutUint64(h[1:9], off)
	binary.BigEndian.PutUint32(h[9:13], length)
	_, err := w.Write(h[:])
	return err
}

func readRecord(r io.Reader) (kind byte, off uint64, length uint32, err error) {
	var h [13]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, 0, fmt.Errorf("the stream ended before its end record: %w", unexpected(err))
	}
	return h[0], binary.BigEndian.Uint64(h[1:9]), binary.BigEndian.Uint32(h[9:13]), nil
}

// unexpected turns a clean EOF where more was due into ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	return unexpected(err)
}

func isZero(p []byte) bool {
	for len(p) >= 8 {
		if binary.NativeEndian.Uint64(p) != 0 {
			return false
		}
		p = p[8:]
	}
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}
