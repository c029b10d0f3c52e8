package main

import (
	"fmt"
	"os"
	"strings"
)

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

// processCPU is the CPU time, in seconds, that pid has used so far.
func processCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces; the fields after it are fixed.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	var utime, stime float64
	_, _ = fmt.Sscan(fields[11], &utime)
	_, _ = fmt.Sscan(fields[12], &stime)
	return (utime + stime) / clockTicks
}

// machineCPU is the busy CPU time, in seconds, of all CPUs since boot.
func machineCPU() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])[1:]
	var busy float64
	for i, f := range fields {
		var v float64
		_, _ = fmt.Sscan(f, &v)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / clockTicks
}
