package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// shell boots the guest with a shell on this terminal (the guest's first
// serial port) under software emulation, and a scratch disk when asked:
// for a person to try lvm2 or nfsd on Debian's kernel by hand.
func shell(ctx context.Context, dir, disk string) error {
	args := []string{"-machine", "pc,accel=tcg", "-cpu", "max", "-m", "2048", "-smp", "2", "-nographic", "-no-reboot",
		"-kernel", filepath.Join(dir, "vmlinuz"), "-initrd", filepath.Join(dir, "initrd.cpio"),
		"-append", "console=ttyS0 panic=-1 quiet strata.hostname=shell strata.shell",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0"}
	if disk != "" {
		img := filepath.Join(dir, "..", "shell-disk.img")
		if out, err := exec.CommandContext(ctx, "truncate", "-s", disk, img).CombinedOutput(); err != nil {
			return fmt.Errorf("truncate -s %s %s: %w: %s", disk, img, err, out)
		}
		args = append(args, "-drive", "file="+img+",format=raw,if=virtio,cache=unsafe")
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
