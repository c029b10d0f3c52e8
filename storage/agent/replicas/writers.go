package replicas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// KillWriters kills every process that has a file on device dev open for
// writing or mapped shared and writable, or the block device dev itself:
// a fence stops the writes a read-only flag would not, as the flag is
// checked when a file is opened, not at each write.
func KillWriters(dev uint64) error {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	self := os.Getpid()
	var killed []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		if writesTo(pid, dev) {
			// A process gone meanwhile is no writer.
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("killing process %d, which writes to a fenced volume: %w", pid, err)
			}
			killed = append(killed, pid)
		}
	}
	return awaitReleased(killed, dev)
}

// released bounds the wait for killed writers to let go of their files:
// a kill is delivered at once, but the files close as the process exits.
const released = 5 * time.Second

// awaitReleased waits until none of the killed processes holds a file on
// dev open for writing, so that a remount read-only that follows does
// not find the filesystem busy.
func awaitReleased(pids []int, dev uint64) error {
	deadline := time.Now().Add(released)
	for _, pid := range pids {
		for writesTo(pid, dev) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d, killed for writing to a fenced volume, still holds its files after %s", pid, released)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// writesTo says whether the process has a file on dev, or the block
// device dev, open for writing, or mapped shared and writable: a
// mapping writes its pages back long after its file was closed.
func writesTo(pid int, dev uint64) bool {
	return writesThroughFiles(pid, dev) || writesThroughMappings(pid, dev)
}

func writesThroughFiles(pid int, dev uint64) bool {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false // gone, or a kernel thread
	}
	for _, fd := range fds {
		if !onDevice(filepath.Join(fdDir, fd.Name()), dev) {
			continue
		}
		if info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name())); err == nil && openForWriting(string(info)) {
			return true
		}
	}
	return false
}

// writesThroughMappings reads the process's shared writable mappings
// ("rw-s" in /proc/PID/maps) and stats each mapped file through
// /proc/PID/map_files: the maps file's device is the filesystem's, not
// a btrfs subvolume's, and its path is the process's own view.
func writesThroughMappings(pid int, dev uint64) bool {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(maps), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || !strings.HasPrefix(fields[1], "rw") || fields[1][3] != 's' {
			continue
		}
		if onDevice(fmt.Sprintf("/proc/%d/map_files/%s", pid, fields[0]), dev) {
			return true
		}
	}
	return false
}

// onDevice says whether path is a file on dev, or the block device dev.
func onDevice(path string, dev uint64) bool {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return false
	}
	return st.Dev == dev || (st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == dev)
}

// openForWriting reads the access mode from an fdinfo's flags line
// (octal open flags).
func openForWriting(fdinfo string) bool {
	for _, line := range strings.Split(fdinfo, "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return false
}
