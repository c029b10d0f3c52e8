package lvm

import "os"

// KernelHasDeviceMapper asks the kernel, not /dev: installing lvm2
// creates /dev/mapper/control whether or not the kernel has
// device-mapper, and without it lvm2 can make no logical volume.
func KernelHasDeviceMapper() bool {
	_, err := os.Stat("/sys/class/misc/device-mapper")
	return err == nil
}
