package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

// processCPU is the CPU time, in seconds, that pid has used so far.
func processCPU(pid int) float64 {
	_, _, cpu := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return cpu
}

// childrenCPU is the CPU time, in seconds, used so far by this process's
// children named command (the control plane's kube-apiserver and etcd).
func childrenCPU(command string) float64 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total float64
	for _, stat := range stats {
		if name, parent, cpu := readStat(stat); name == command && parent == os.Getpid() {
			total += cpu
		}
	}
	return total
}

// readStat reads a /proc/<pid>/stat file: the command name, the parent's
// pid and the CPU seconds used.
func readStat(path string) (command string, parent int, cpu float64) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0
	}
	// The command name may hold spaces; the fields after it are fixed.
	fields := strings.Fields(s[end+1:])
	if len(fields) < 13 {
		return "", 0, 0
	}
	var utime, stime float64
	_, _ = fmt.Sscan(fields[1], &parent)
	_, _ = fmt.Sscan(fields[11], &utime)
	_, _ = fmt.Sscan(fields[12], &stime)
	return s[open+1 : end], parent, (utime + stime) / clockTicks
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

// waitIdle returns once the control plane uses less than a twentieth of a
// core over a second, so that a measurement starts from an idle API server
// rather than one still at its own start-up work (it builds the OpenAPI
// documents of every CRD after it starts serving). It returns how long
// that took.
func waitIdle(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < limit {
		before := serverCPU()
		time.Sleep(time.Second) // the window the rate is measured over
		if serverCPU()-before < 0.05 {
			return time.Since(start), nil
		}
	}
	return time.Since(start), fmt.Errorf("the control plane was still busy after %s", limit)
}
