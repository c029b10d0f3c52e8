// Package btrfs manages subvolumes, read-only snapshots and quota limits
// on a mounted btrfs filesystem. Snapshots, deletion and quota setup go
// through btrfs-progs. The steps every new volume takes (create a
// subvolume, limit it, set its compression) are the ioctl and extended
// attribute that btrfs-progs itself issues, made directly: a process per
// step was most of a volume's creation time. What is read (subvolume
// IDs, qgroup accounting) comes from ioctls and sysfs. The tests check
// every change with btrfs-progs.
package btrfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/command"
)

// Filesystem is a mounted btrfs with quotas enabled.
type Filesystem struct {
	// Path is where the filesystem is mounted, or any directory in it.
	Path   string
	UUID   string
	Runner command.Runner
	// SysFS is /sys/fs/btrfs, where the kernel reports qgroups.
	SysFS string
}

// ErrNotBtrfs is returned by Open for a path on another filesystem.
var ErrNotBtrfs = errors.New("not on a btrfs filesystem")

// Open returns the btrfs filesystem path is on and turns its quotas on
// (a no-op when they are on): limits and usage need them.
func Open(ctx context.Context, path string) (*Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("btrfs at %s: %w", path, err)
	}
	if st.Type != unix.BTRFS_SUPER_MAGIC {
		return nil, fmt.Errorf("%s: %w; mount a btrfs filesystem there or pick a directory in one", path, ErrNotBtrfs)
	}
	uuid, err := fsid(path)
	if err != nil {
		return nil, fmt.Errorf("btrfs at %s: reading its UUID: %w", path, err)
	}
	f := &Filesystem{Path: path, UUID: uuid, Runner: command.Exec{}, SysFS: "/sys/fs/btrfs"}
	if _, err := os.Stat(f.qgroupDir()); errors.Is(err, fs.ErrNotExist) {
		if _, err := f.Runner.Run(ctx, "btrfs", "quota", "enable", path); err != nil {
			return nil, fmt.Errorf("btrfs at %s: turning quotas on: %w", path, err)
		}
	}
	return f, nil
}

// CreateSubvolume makes an empty subvolume at path, a member of the given
// level-1 qgroups from the start, as `btrfs subvolume create -i` does
// (BTRFS_IOC_SUBVOL_CREATE_V2 on the parent directory). Joining at
// creation costs nothing; joining after (`btrfs qgroup assign`) was most
// of a volume's creation time.
func (f *Filesystem) CreateSubvolume(_ context.Context, path string, groups ...GroupID) error {
	// struct btrfs_ioctl_vol_args_v2: fd, transid, flags, then a union of
	// {size, qgroup_inherit pointer} with four u64s, then the name.
	var args struct {
		FD, TransID, Flags uint64
		Size               uint64
		Inherit            uintptr
		_                  [2]uint64
		Name               [4040]byte
	}
	name := filepath.Base(path)
	if len(name) >= len(args.Name) {
		return fmt.Errorf("creating subvolume %s: name too long", path)
	}
	copy(args.Name[:], name)
	// struct btrfs_qgroup_inherit: flags, num_qgroups, num_ref_copies,
	// num_excl_copies, a struct btrfs_qgroup_limit of five u64s, then the
	// qgroup IDs.
	inherit := make([]uint64, 9, 9+len(groups))
	inherit[1] = uint64(len(groups))
	for _, g := range groups {
		inherit = append(inherit, g.qgroupID())
	}
	if len(groups) > 0 {
		args.Flags = subvolQgroupInherit
		args.Size = uint64(8 * len(inherit))
		args.Inherit = uintptr(unsafe.Pointer(&inherit[0]))
	}
	err := ioctl(filepath.Dir(path), iocSubvolCreateV2, unsafe.Pointer(&args))
	runtime.KeepAlive(inherit)
	if err != nil {
		return fmt.Errorf("creating subvolume %s: %w", path, err)
	}
	return nil
}

// Snapshot makes a snapshot of the subvolume src at dst, read-only or
// writable (a clone), a member of the given level-1 qgroups from the
// start: joined later, a snapshot's extents shared with its source would
// leave the quota accounting inconsistent until a rescan, and unenforced.
func (f *Filesystem) Snapshot(ctx context.Context, src, dst string, readOnly bool, groups ...GroupID) error {
	args := []string{"subvolume", "snapshot"}
	if readOnly {
		args = append(args, "-r")
	}
	for _, g := range groups {
		args = append(args, "-i", g.String())
	}
	_, err := f.Runner.Run(ctx, "btrfs", append(args, src, dst)...)
	return err
}

// DeleteSubvolume removes the subvolume at path with its quota group.
// A path that does not exist is already deleted.
func (f *Filesystem) DeleteSubvolume(ctx context.Context, path string) error {
	id, err := SubvolumeID(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Runner.Run(ctx, "btrfs", "subvolume", "delete", "--commit-after", path); err != nil {
		return err
	}
	// The kernel may keep an empty qgroup of a deleted subvolume; it holds
	// no data, so a failure to drop it is only untidy.
	_, _ = f.Runner.Run(ctx, "btrfs", "qgroup", "destroy", fmt.Sprintf("0/%d", id), f.Path)
	return nil
}

// SetLimit sets the subvolume's quota: at most bytes referenced, as
// `btrfs qgroup limit` does (BTRFS_IOC_QGROUP_LIMIT on the subvolume).
func (f *Filesystem) SetLimit(_ context.Context, path string, bytes int64) error {
	if err := limitQgroup(path, 0, uint64(bytes)); err != nil {
		return fmt.Errorf("limiting subvolume %s to %d bytes: %w", path, bytes, err)
	}
	return nil
}

// noLimit, as a qgroup's limit, takes the limit away.
const noLimit = ^uint64(0)

// limitQgroup sets the limit on referenced bytes of a qgroup through the
// filesystem at path (BTRFS_IOC_QGROUP_LIMIT); qgroup 0 is the subvolume
// of path itself.
func limitQgroup(path string, qgroup, bytes uint64) error {
	// struct btrfs_ioctl_qgroup_limit_args: qgroupid, then struct
	// btrfs_qgroup_limit: flags, max_rfer, max_excl, rsv_rfer, rsv_excl.
	args := struct {
		QgroupID uint64
		Flags    uint64
		MaxRfer  uint64
		MaxExcl  uint64
		RsvRfer  uint64
		RsvExcl  uint64
	}{QgroupID: qgroup, Flags: qgroupLimitMaxRfer, MaxRfer: bytes}
	return ioctl(path, iocQgroupLimit, unsafe.Pointer(&args))
}

// SetCompression sets the compression of new writes to the subvolume:
// algorithm zstd, lzo or zlib, with a level for zstd (1-15) and zlib
// (1-9), 0 for the default; an empty algorithm turns it off. It sets the
// btrfs.compression attribute, which `btrfs property set` sets.
func (f *Filesystem) SetCompression(_ context.Context, path, algorithm string, level int) error {
	value := algorithm
	if algorithm == "" {
		value = "none"
	} else if level > 0 {
		value = fmt.Sprintf("%s:%d", algorithm, level)
	}
	if err := unix.Setxattr(path, "btrfs.compression", []byte(value), 0); err != nil {
		return fmt.Errorf("setting compression %s on %s: %w", value, path, err)
	}
	return nil
}

// SetNoCOW turns copy-on-write off for files created in the directory
// (chattr +C), which databases and VM images want. It works only while
// the directory is empty of file data.
func SetNoCOW(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	flags, err := unix.IoctlGetUint32(int(file.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("reading attributes of %s: %w", path, err)
	}
	if err := unix.IoctlSetPointerInt(int(file.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsNoCOW)); err != nil {
		return fmt.Errorf("setting No_COW on %s: %w", path, err)
	}
	return nil
}

// Usage is what a subvolume's quota group accounts.
type Usage struct {
	// Referenced is the data the subvolume can reach, shared or not.
	Referenced int64
	// Exclusive is the data only this subvolume holds.
	Exclusive int64
	// Limit is the most it may reference; 0 is no limit.
	Limit int64
}

// Usage reads the subvolume's quota group from sysfs. The kernel updates
// it when a transaction commits, so it can lag behind recent writes by
// up to the commit interval.
func (f *Filesystem) Usage(path string) (Usage, error) {
	id, err := SubvolumeID(path)
	if err != nil {
		return Usage{}, err
	}
	dir := filepath.Join(f.qgroupDir(), fmt.Sprintf("0_%d", id))
	var u Usage
	for file, into := range map[string]*int64{"referenced": &u.Referenced, "exclusive": &u.Exclusive, "max_referenced": &u.Limit} {
		if *into, err = readInt(filepath.Join(dir, file)); err != nil {
			return Usage{}, fmt.Errorf("quota group 0/%d of %s: %w", id, path, err)
		}
	}
	return u, nil
}

// UpdateQuotaAccounting commits the filesystem's transaction, which
// brings quota accounting up to date; it is no durable commit of what a
// caller wrote (Commit is).
func (f *Filesystem) UpdateQuotaAccounting(ctx context.Context) error {
	_, err := f.Runner.Run(ctx, "btrfs", "filesystem", "sync", f.Path)
	return err
}

// Commit returns once everything written to the filesystem so far, file
// data and metadata, subvolumes made and removed, is on disk: syncfs(2),
// which on btrfs writes back dirty data and then commits the running
// transaction. A btrfs transaction commits whole and in order, so a
// change durable after Commit takes every change made before it along.
func (f *Filesystem) Commit() error {
	fd, err := unix.Open(f.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("btrfs at %s: %w", f.Path, err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("btrfs at %s: syncing it to disk: %w", f.Path, err)
	}
	return nil
}

func (f *Filesystem) qgroupDir() string { return filepath.Join(f.SysFS, f.UUID, "qgroups") }

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// IsSubvolume says whether path is the root of a subvolume: on btrfs a
// subvolume's root directory is always inode 256.
func IsSubvolume(path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return false, err
	}
	return st.Ino == 256 && st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// SubvolumeID is the ID of the subvolume path is in.
func SubvolumeID(path string) (uint64, error) {
	// struct btrfs_ioctl_ino_lookup_args: treeid, objectid, name[4080].
	var args struct {
		TreeID   uint64
		ObjectID uint64
		Name     [4080]byte
	}
	args.ObjectID = 256 // the first free object ID: a subvolume's root
	if err := ioctl(path, iocInoLookup, unsafe.Pointer(&args)); err != nil {
		return 0, fmt.Errorf("subvolume ID of %s: %w", path, err)
	}
	return args.TreeID, nil
}

// fsid is the filesystem's UUID, which names it under /sys/fs/btrfs.
func fsid(path string) (string, error) {
	// struct btrfs_ioctl_fs_info_args: max_id, num_devices, fsid[16], and
	// fields up to 1024 bytes this package does not read.
	var args struct {
		MaxID      uint64
		NumDevices uint64
		FSID       [16]byte
		Rest       [1024 - 32]byte
	}
	if err := ioctl(path, iocFSInfo, unsafe.Pointer(&args)); err != nil {
		return "", err
	}
	b := args.FSID
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// fsNoCOW is FS_NOCOW_FL, the inode attribute chattr +C sets.
const fsNoCOW = 0x00800000

// The btrfs ioctls this package uses: _IOWR(0x94, 18, 4096),
// _IOR(0x94, 31, 1024), _IOW(0x94, 24, 4096) and _IOR(0x94, 43, 48).
const (
	iocInoLookup      = 0xd0009412
	iocFSInfo         = 0x8400941f
	iocSubvolCreateV2 = 0x50009418

	subvolQgroupInherit = 1 << 2
	iocQgroupLimit      = 0x8030942b
	iocQgroupCreate     = 0x4010942a

	qgroupLimitMaxRfer = 1 << 0
)

func ioctl(path string, request uintptr, arg unsafe.Pointer) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, file.Fd(), request, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
