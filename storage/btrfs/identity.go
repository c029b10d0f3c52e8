package btrfs

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// subvolInfo is struct btrfs_ioctl_get_subvol_info_args, whose fields
// this package reads up to the received UUID.
type subvolInfo struct {
	TreeID       uint64
	Name         [256]byte
	ParentID     uint64
	DirID        uint64
	Generation   uint64
	Flags        uint64
	UUID         [16]byte
	ParentUUID   [16]byte
	ReceivedUUID [16]byte
	Rest         [504 - 344]byte
}

// identity is the UUID a send stream names this subvolume by when it is
// the parent: the UUID it was received under, else its own (the kernel
// sends the received one when there is one).
func (i *subvolInfo) identity() [16]byte {
	if i.ReceivedUUID != [16]byte{} {
		return i.ReceivedUUID
	}
	return i.UUID
}

// subvolumeInfo reads the subvolume whose root is path
// (BTRFS_IOC_GET_SUBVOL_INFO).
func subvolumeInfo(path string) (*subvolInfo, error) {
	var info subvolInfo
	if err := ioctl(path, iocGetSubvolInfo, unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("reading subvolume %s: %w", path, err)
	}
	return &info, nil
}

// uuidInUse says whether a subvolume of the filesystem has the UUID, as
// its own or as the one it was received under: the UUID tree's keys
// (BTRFS_IOC_TREE_SEARCH on tree 9, the UUID split into the key's object
// ID and offset).
func (f *Filesystem) uuidInUse(uuid [16]byte) (bool, error) {
	// struct btrfs_ioctl_search_args: the search key, then a buffer of
	// what was found; only the count of items is read.
	var args struct {
		TreeID, MinObjectID, MaxObjectID, MinOffset, MaxOffset, MinTransID, MaxTransID uint64
		MinType, MaxType, NrItems, _                                                   uint32
		_                                                                              [4]uint64
		Buf                                                                            [4096 - 104]byte
	}
	args.TreeID = uuidTreeID
	args.MinObjectID = binary.LittleEndian.Uint64(uuid[0:8])
	args.MaxObjectID = args.MinObjectID
	args.MinOffset = binary.LittleEndian.Uint64(uuid[8:16])
	args.MaxOffset = args.MinOffset
	args.MaxTransID = ^uint64(0)
	args.MinType, args.MaxType = uuidKeySubvol, uuidKeyReceivedSubvol
	args.NrItems = 1
	if err := ioctl(f.Path, iocTreeSearch, unsafe.Pointer(&args)); err != nil {
		return false, fmt.Errorf("looking up subvolume UUID %s on %s: %w", formatUUID(uuid[:]), f.Path, err)
	}
	return args.NrItems > 0, nil
}

// regularFileBeneath checks that path, under the directory dir, is a
// regular file reached without leaving dir and without following a
// symbolic link (openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS).
func regularFileBeneath(dir *os.File, path string) error {
	fd, err := unix.Openat2(int(dir.Fd()), path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return fmt.Errorf("opening it inside the parent without following links: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("not a regular file")
	}
	return nil
}

// _IOR(0x94, 60, 504) and _IOWR(0x94, 17, 4096), and the UUID tree's
// object and key types.
const (
	iocGetSubvolInfo      = 0x81f8943c
	iocTreeSearch         = 0xd0009411
	uuidTreeID            = 9
	uuidKeySubvol         = 251
	uuidKeyReceivedSubvol = 252
)
