package debian

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"sort"
)

// Cpio writes the files as a cpio archive in the "newc" format the
// kernel unpacks an initramfs from: sorted by path, parents first, owned
// by root, every time zero, with any folder a path needs. A hard link is written as a copy of its
// target, so that the archive needs no link bookkeeping.
func (fs Rootfs) Cpio(w io.Writer) error {
	// The kernel makes no missing parent folder: each is written, before
	// what it holds.
	for n := range fs {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if _, ok := fs[d]; !ok {
				fs.Dir(d, 0o755)
			}
		}
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := &CpioWriter{w: w}
	for _, n := range names {
		e := fs[n]
		if e.hdr.Typeflag == tar.TypeLink {
			target, ok := fs[e.hdr.Linkname]
			if !ok {
				return fmt.Errorf("%s: a hard link to %s, which no package holds", n, e.hdr.Linkname)
			}
			e = &Entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: target.hdr.Mode}, data: target.data}
		}
		var err error
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			err = cw.Dir(n, e.hdr.Mode)
		case tar.TypeSymlink:
			err = cw.Symlink(n, e.hdr.Linkname)
		case tar.TypeReg:
			err = cw.File(n, e.hdr.Mode, e.data)
		default:
			err = fmt.Errorf("type %q cannot be put in an initramfs", e.hdr.Typeflag)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return cw.Close()
}

// CpioWriter writes a newc cpio archive entry by entry.
type CpioWriter struct {
	w     io.Writer
	inode int
	err   error
}

const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
)

// Dir writes a directory.
func (c *CpioWriter) Dir(name string, perm int64) error {
	return c.entry(name, modeDir|perm&0o7777, nil)
}

// File writes a regular file.
func (c *CpioWriter) File(name string, perm int64, data []byte) error {
	return c.entry(name, modeRegular|perm&0o7777, data)
}

// Symlink writes a symbolic link: its target is the entry's data.
func (c *CpioWriter) Symlink(name, target string) error {
	return c.entry(name, modeSymlink|0o777, []byte(target))
}

// Close writes the trailer that ends the archive.
func (c *CpioWriter) Close() error { return c.entry("TRAILER!!!", 0, nil) }

func (c *CpioWriter) entry(name string, mode int64, data []byte) error {
	if c.err != nil {
		return c.err
	}
	c.inode++
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	// magic, inode, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize, check: each 8 hex digits.
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.inode, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad(len(hdr) + len(name) + 1)
	c.write(data)
	c.pad(len(data))
	return c.err
}

func (c *CpioWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

// pad aligns what follows to four bytes, as newc requires.
func (c *CpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}
