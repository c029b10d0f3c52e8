package main

import (
	_ "embed"
	"regexp"

	"github.com/strata-gitops/strata/hack/debian"
)

//go:embed init.sh
var initScript []byte

var busyboxTools = []string{"sed", "grep", "awk", "hostname", "ip", "ps", "find", "xargs", "less", "ping", "nc", "diff", "gzip", "which"}

// configure makes the unpacked packages a system that boots: the init,
// the folders the kernel's filesystems are mounted on, the accounts and
// services the NFS tools look up, and lvm2 without udev.
func configure(fs debian.Rootfs) error {
	fs.Put("init", 0o755, initScript)
	for _, d := range []string{"proc", "sys", "dev", "run", "tmp", "root", "guest", "var/lib/nfs", "etc/exports.d"} {
		fs.Dir(d, 0o755)
	}
	fs.Dir("tmp", 0o1777)
	fs.Put("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nstatd:x:102:65534::/var/lib/nfs:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"))
	fs.Put("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	fs.Put("etc/hosts", 0o644, []byte("127.0.0.1 localhost\n"))
	fs.Put("etc/exports", 0o644, nil)
	// Debian's essential tools no package of the lock depends on are
	// busybox's.
	for _, tool := range busyboxTools {
		if _, ok := fs["bin/"+tool]; !ok {
			fs.Link("bin/"+tool, "busybox")
		}
	}
	// The guest has no udev: lvm2 makes the device nodes itself, and
	// does not wait for udev to acknowledge them.
	return fs.Edit("etc/lvm/lvm.conf", func(b []byte) []byte {
		for _, set := range []struct{ key, value string }{
			{"udev_sync", "0"}, {"udev_rules", "0"}, {"verify_udev_operations", "1"},
			{"obtain_device_list_from_udev", "0"}, {"monitoring", "0"},
		} {
			b = regexp.MustCompile(`(?m)^(\s*)# `+set.key+` = .*$`).ReplaceAll(b, []byte("${1}"+set.key+" = "+set.value))
		}
		return b
	})
}
