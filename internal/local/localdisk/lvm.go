package localdisk

import "os/exec"

// ForgetLVM removes volume groups and the LVM labels of scratch disks
// with the real tools, whatever was left on them, before the disks are
// detached. It ignores lvm2's hints, which re-attached disks make stale.
// Only for loop-device disks made for tests and benchmarks.
func ForgetLVM(groups []string, disks ...string) {
	for _, vg := range groups {
		_ = exec.Command("lvm", "vgremove", "--config", `devices/hints="none"`, "--force", "--force", vg).Run()
	}
	for _, d := range disks {
		_ = exec.Command("lvm", "pvremove", "--config", `devices/hints="none"`, "--force", "--force", "--yes", d).Run()
	}
}
