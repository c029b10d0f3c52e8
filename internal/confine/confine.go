// Package confine starts a process that can reach only the files it is
// given, by Landlock: the programs and libraries of the system, read and
// executed, and the paths its caller names, read or written. A tool fed
// a hostile input (qemu-img reading a tenant's image) then cannot open
// the host's other files, whatever the input makes it try.
package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Paths is what a confined process may reach besides the system's
// programs and libraries: Read only read, Write read and written. Each
// is a file, a block device, or a directory with what is below it, and
// never a symbolic link: a rule names what the caller named, not what a
// link someone else can change points at.
type Paths struct {
	Read, Write []string
	// Files are open files the process is handed as descriptors 3, 4,
	// ... (/dev/fd/3 ...): it may read and write those very files, and
	// the caller, not a path, chose them.
	Files []*os.File
}

// system is read and executed by every confined process: where
// programs, their libraries and the loader's cache live.
var system = []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ld.so.cache"}

// devices are the harmless ones every process may read and write.
var devices = []string{"/dev/null", "/dev/zero", "/dev/urandom"}

// ABI is the Landlock ABI the kernel serves, 0 when it has none (a
// kernel before 5.13, or Landlock not enabled).
func ABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// ErrUnavailable is a kernel without Landlock.
var ErrUnavailable = errors.New("the kernel does not enforce Landlock (Linux 5.13 or later, with landlock in its lsm= list)")

// Start starts cmd confined to p. The confinement is set on a thread of
// its own, which starts cmd and then ends with its goroutine: the child
// inherits the thread's domain, and no other goroutine runs there.
func Start(cmd *exec.Cmd, p Paths) error {
	abi := ABI()
	if abi == 0 {
		return ErrUnavailable
	}
	ruleset, err := newRuleset(abi, p)
	if err != nil {
		return err
	}
	defer unix.Close(ruleset)
	if cmd.Stdin == nil {
		// os/exec opens /dev/null on the confined thread otherwise.
		null, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		defer null.Close()
		cmd.Stdin = null
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			started <- fmt.Errorf("confining %s: no_new_privs: %w", cmd.Path, err)
			return
		}
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
			started <- fmt.Errorf("confining %s: landlock_restrict_self: %w", cmd.Path, errno)
			return
		}
		started <- cmd.Start()
	}()
	return <-started
}

// access is every file system right the ABI knows, and those of them
// that apply to a file rather than a directory.
func access(abi int) (all, file uint64) {
	all = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	file = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE
	if abi >= 2 {
		all |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		all |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
		file |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		all |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
		file |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return all, file
}

// newRuleset handles every file system right, and allows the system
// read and execute, p.Read read and p.Write read and write.
func newRuleset(abi int, p Paths) (int, error) {
	all, file := access(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: all}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 8, 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	// Writing is every right on a file's content but running it.
	read := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
	write := read | file&^unix.LANDLOCK_ACCESS_FS_EXECUTE
	for _, r := range []struct {
		paths  []string
		access uint64
		// system paths are the host's own, root's to change: their
		// links (/lib64 on a merged /usr) are followed, and one missing
		// is skipped.
		system bool
	}{
		{system, read | unix.LANDLOCK_ACCESS_FS_EXECUTE, true},
		{devices, write, true},
		{p.Read, read, false},
		{p.Write, write, false},
	} {
		for _, path := range r.paths {
			err := allowPath(int(fd), abi, path, r.access, r.system)
			if r.system && errors.Is(err, os.ErrNotExist) {
				continue // a system without /lib64, say
			}
			if err != nil {
				unix.Close(int(fd))
				return -1, err
			}
		}
	}
	for _, f := range p.Files {
		if err := allow(int(fd), abi, f, f.Name(), write); err != nil {
			unix.Close(int(fd))
			return -1, err
		}
	}
	return int(fd), nil
}

// allowPath adds a rule for path. A caller's path is opened without
// following a link at its end, and one that is a link is refused: the
// rule would otherwise be for whatever the link pointed at then.
func allowPath(ruleset, abi int, path string, rights uint64, followLinks bool) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if !followLinks {
		flags |= unix.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return allow(ruleset, abi, f, path, rights)
}

// allow adds a rule for the open file f, keeping to the rights that
// apply to a file when f is not a directory.
func allow(ruleset, abi int, f *os.File, name string, rights uint64) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return fmt.Errorf("%s is a symbolic link: a confined process is given what a path names, never a link", name)
	case unix.S_IFDIR:
	default:
		_, file := access(abi)
		rights &= file
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(f.Fd())}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("allowing %s to a confined process: %w", name, errno)
	}
	return nil
}
