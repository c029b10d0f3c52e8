#!/bin/sh
# The guest's init (hack/guest): mounts the kernel's filesystems, loads
# the modules the tests need, sets up the network the kernel command line
# names, runs /guest/run (which the test harness adds to the initramfs)
# with its output on the second serial port, says how it ended, and
# powers off; with strata.shell on the command line, a shell on the
# console instead (go run ./hack/guest shell).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/lib/nfs
mount -t configfs configfs /sys/kernel/config 2>/dev/null
mkdir -p /run/lvm /run/lock/lvm /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery
out=/dev/ttyS1
for m in $(cat /etc/guest/modules); do
  insmod "$m" || echo "strata-guest: insmod $m failed" >"$out"
done
hostname "$(sed -n 's/.*strata.hostname=\([^ ]*\).*/\1/p' /proc/cmdline)"
ip link set lo up
# eth0 is qemu's user network: the host is 10.0.2.2 on it.
if ip link show eth0 >/dev/null 2>&1; then
  ip link set eth0 up
  ip addr add 10.0.2.15/24 dev eth0
  ip route add default via 10.0.2.2
fi
# eth1 joins the guests of one test; strata.ip= is this guest's address.
peer_ip=$(sed -n 's/.*strata.ip=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$peer_ip" ]; then
  ip link set eth1 up
  ip addr add "$peer_ip" dev eth1
fi
if grep -q 'strata.shell' /proc/cmdline; then
  # go run ./hack/guest shell: a person looks around.
  echo "strata-guest: a shell on the console; busybox poweroff -f leaves" >/dev/ttyS0
  setsid sh -c 'exec sh </dev/ttyS0 >/dev/ttyS0 2>&1'
  code=0
elif [ -x /guest/run ]; then
  cd /guest && ./run >"$out" 2>&1 </dev/null
  code=$?
else
  echo "strata-guest: /guest/run is missing: the harness adds it" >"$out"
  code=127
fi
echo "strata-guest-exit $code" >"$out"
sync
busybox poweroff -f
