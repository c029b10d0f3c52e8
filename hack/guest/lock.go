package main

// Arch is the guest's architecture: the host's, so that qemu can run it
// with KVM where the host allows.
const Arch = "amd64"

// Roots are the packages the guest is built from; the lock holds them and
// all they depend on.
var Roots = []string{
	// The kernel of Debian's cloud images: virtio, device-mapper,
	// dm-thin-pool and nfsd, as modules.
	"linux-image-cloud-amd64", "kmod",
	// What the agent and the CSI node service drive on a node.
	"lvm2", "thin-provisioning-tools", "btrfs-progs", "e2fsprogs", "xfsprogs", "util-linux", "mount",
	// The kernel's NFS server and its client.
	"nfs-kernel-server", "nfs-common",
	// The guest's init, shell and small tools (ip, poweroff).
	"busybox-static", "coreutils", "dash",
}

const lockHeader = `# The Debian packages of the test guest (hack/guest/lock.go): the roots
# and all they depend on, each pinned by version and the SHA-256 of its
# file. Written by go run ./hack/guest lock; the guest is built only from
# these files, and again whenever this file changes.
`
