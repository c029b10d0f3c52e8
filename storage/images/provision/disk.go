package provision

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DiskFile is the raw disk's file in a btrfs volume or a filesystem
// volume's directory.
const DiskFile = "disk.raw"

// OpenDisk opens DiskFile in dir, a volume's directory whose contents a
// tenant writes (over NFS, or from a pod), to be filled: made when
// missing, grown sparse to size when smaller. A tenant may have put
// anything there, so nothing it made is followed: no symbolic link at
// any level below dir (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and
// only a regular file with one link, so that neither a link nor a hard
// link to a host file lets the agent write that file. A FIFO does not
// hold the open (O_NONBLOCK) and is refused like any other non-file.
func OpenDisk(dir string, size int64) (*os.File, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the volume's directory %s: %w", dir, err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, DiskFile, &unix.OpenHow{
		Flags:   unix.O_RDWR | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	path := dir + "/" + DiskFile
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("%s in the volume is a symbolic link (%s): an image is written only to a regular file the volume holds; remove the link", DiskFile, path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkDisk(f, size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkDisk refuses what OpenDisk must not write, then grows the file to
// size: the check comes first, so a refused file is left as it was.
func checkDisk(f *os.File, size int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s in the volume is not a regular file (%s): remove it, and the image job makes the disk", DiskFile, f.Name())
	}
	if st.Nlink != 1 {
		return fmt.Errorf("%s in the volume has %d hard links (%s): an image is written only to a file with one; remove it", DiskFile, st.Nlink, f.Name())
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		return err
	}
	if st.Size >= size {
		return nil
	}
	return f.Truncate(size) // sparse: zeros until written
}
