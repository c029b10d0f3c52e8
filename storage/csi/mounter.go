package csi

import (
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

// NewMounter returns the mounter the node service formats and mounts
// with: mount-utils' format-if-blank logic, with mounts made by the mount
// system call itself where mount(8) would only have translated options.
// A process per mount is most of a mount's cost on a busy node.
func NewMounter() *mount.SafeFormatAndMount {
	return &mount.SafeFormatAndMount{Interface: kernelMounter{mount.New("")}, Exec: utilexec.New()}
}

// kernelMounter mounts through the system call, and leaves to mount(8)
// what needs more than the kernel: bind mounts, and options only mount(8)
// understands.
type kernelMounter struct{ mount.Interface }

// Mount implements mount.Interface.
func (m kernelMounter) Mount(source, target, fstype string, options []string) error {
	return m.MountSensitive(source, target, fstype, options, nil)
}

// MountSensitive implements mount.Interface.
func (m kernelMounter) MountSensitive(source, target, fstype string, options, sensitive []string) error {
	flags, data, ok := bySyscall(fstype, append(append([]string(nil), options...), sensitive...))
	if !ok {
		return m.Interface.MountSensitive(source, target, fstype, options, sensitive)
	}
	return unix.Mount(source, target, fstype, flags, data)
}

// helperFilesystems are mounted through their mount(8) helper, which
// gives the kernel what a bare system call cannot: mount.nfs resolves the
// server and passes its address (addr=), without which the kernel refuses
// an NFS mount.
var helperFilesystems = map[string]bool{"nfs": true, "nfs4": true, "cifs": true, "smb3": true}

// bySyscall returns the system call's flags and data for a mount, and
// whether the system call can make it at all.
func bySyscall(fstype string, options []string) (flags uintptr, data string, ok bool) {
	if fstype == "" || helperFilesystems[fstype] || strings.HasPrefix(fstype, "fuse") {
		return 0, "", false
	}
	return kernelOptions(options)
}

// flagOptions are the mount options that are flags of the system call.
var flagOptions = map[string]uintptr{
	"defaults": 0, "rw": 0, "ro": unix.MS_RDONLY, "noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME,
	"relatime": unix.MS_RELATIME, "strictatime": unix.MS_STRICTATIME, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV,
	"noexec": unix.MS_NOEXEC, "sync": unix.MS_SYNCHRONOUS, "dirsync": unix.MS_DIRSYNC, "lazytime": unix.MS_LAZYTIME,
}

// userspaceOptions mean something to mount(8) only.
var userspaceOptions = map[string]bool{
	"bind": true, "rbind": true, "remount": true, "loop": true, "auto": true, "noauto": true, "user": true,
	"users": true, "nouser": true, "owner": true, "group": true, "nofail": true, "_netdev": true,
}

// kernelOptions splits options into the system call's flags and the
// filesystem's data string; ok is false when mount(8) is needed.
func kernelOptions(options []string) (flags uintptr, data string, ok bool) {
	var rest []string
	for _, o := range options {
		name, _, _ := strings.Cut(o, "=")
		switch f, isFlag := flagOptions[o]; {
		case isFlag:
			flags |= f
		case userspaceOptions[name] || strings.HasPrefix(name, "x-") || strings.HasPrefix(name, "comment"):
			return 0, "", false
		default:
			rest = append(rest, o)
		}
	}
	return flags, strings.Join(rest, ","), true
}
