#!/usr/bin/env bash
# Installs the Debian packages of the storage tools that the agent drives
# and its tests run for real: lvm2 (pvcreate, vgcreate, lvs, ...), the
# filesystem tools (mkfs.ext4, mkfs.xfs, resize2fs, xfs_growfs) and
# util-linux (losetup, lsblk, wipefs), btrfs-progs, NFS-Ganesha with
# its VFS backend (the userspace NFS server the btrfs agent exports
# through) and libnfs-utils (a userspace NFS client the tests read
# exports with), and what the local cluster's nodes run (docs/development.md,
# "The local cluster"): containerd with runc, the CNI plugins, iptables for
# kube-proxy and nsenter; qemu-utils, which converts VM images; chromium,
# the browser the dashboard's tests drive headless. Idempotent: installed commands are not installed
# again.
set -euo pipefail

say() { echo "packages: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# command -> package
declare -A wanted=(
  [lvm]=lvm2
  [mkfs.ext4]=e2fsprogs
  [mkfs.xfs]=xfsprogs
  [xfs_growfs]=xfsprogs
  [losetup]=util-linux
  [lsblk]=util-linux
  [wipefs]=util-linux
  [blkid]=util-linux
  [mount]=mount
  [btrfs]=btrfs-progs
  [mkfs.btrfs]=btrfs-progs
  [lsattr]=e2fsprogs
  [ganesha.nfsd]="nfs-ganesha nfs-ganesha-vfs"
  [nfs-cat]=libnfs-utils
  [containerd]=containerd
  [ctr]=containerd
  [runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables
  [conntrack]=conntrack
  [nsenter]=util-linux
  [ip]=iproute2
  # The failover tests slow a node's link with tc (internal/testing/e2e).
  [tc]=iproute2
  # Converting VM images to raw, and checking the result (storage/images/qemuimg).
  [qemu-img]=qemu-utils
  # Unpacking Flux's controllers kept in ../shared/flux (hack/tools.sh flux-controllers).
  [xz]=xz-utils
  # Running the release's arm64 tools on this amd64 machine (hack/release).
  [qemu-aarch64-static]=qemu-user-static
  # The dashboard's tests, screenshots and benchmark drive headless Chromium (dashboard/).
  [chromium]=chromium
  # The test guest: Debian's kernel under qemu, for device-mapper and the
  # kernel's NFS server (internal/testing/guest, make kernel-test).
  [qemu-system-x86_64]=qemu-system-x86
  # The busybox image of Kubernetes' storage e2e (make conformance).
  [/bin/busybox]=busybox-static
)

missing=()
for cmd in "${!wanted[@]}"; do
  if ! command -v "$cmd" >/dev/null && [ ! -x "/sbin/$cmd" ] && [ ! -x "/usr/sbin/$cmd" ] && [ ! -x "$cmd" ]; then
    missing+=("${wanted[$cmd]}")
  fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0
# A value may name several packages, so it is split into words here.
# shellcheck disable=SC2068
mapfile -t missing < <(printf '%s\n' ${missing[@]} | sort -u)
say "installing Debian packages ${missing[*]}"
install() { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
install || { as_root apt-get update -q >/dev/null && install; }
