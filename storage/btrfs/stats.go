package btrfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stats is the state of the whole filesystem and of each device in it.
type Stats struct {
	// Size and Free are the filesystem's as statfs sees them: Free is
	// what new data can still use.
	Size    int64         `json:"sizeBytes"`
	Free    int64         `json:"freeBytes"`
	Devices []DeviceStats `json:"devices"`
}

// DeviceStats is one device: its size, what btrfs allocated on it, and
// the error counters the kernel keeps for it.
type DeviceStats struct {
	ID     int64            `json:"devid"`
	Path   string           `json:"path"`
	Size   int64            `json:"sizeBytes"`
	Used   int64            `json:"usedBytes"`
	Errors map[string]int64 `json:"errors"`
}

// Free is the space new data can use, as statfs reports it.
func Free(path string) (size, free int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// Stats reads the filesystem's size, free space, devices and their
// error counters.
func (f *Filesystem) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	var err error
	if s.Size, s.Free, err = Free(f.Path); err != nil {
		return Stats{}, err
	}
	show, err := f.Runner.Run(ctx, "btrfs", "filesystem", "show", "--raw", f.UUID)
	if err != nil {
		return Stats{}, err
	}
	if s.Devices, err = parseDevices(show); err != nil {
		return Stats{}, err
	}
	out, err := f.Runner.Run(ctx, "btrfs", "--format", "json", "device", "stats", f.Path)
	if err != nil {
		return Stats{}, err
	}
	errs, err := parseDeviceErrors(out)
	if err != nil {
		return Stats{}, err
	}
	for i := range s.Devices {
		s.Devices[i].Errors = errs[s.Devices[i].ID]
	}
	return s, nil
}

// parseDevices reads the "devid N size S used U path P" lines of
// `btrfs filesystem show --raw`, whose format is fixed.
func parseDevices(out []byte) ([]DeviceStats, error) {
	var devices []DeviceStats
	lines := bufio.NewScanner(bytes.NewReader(out))
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) < 8 || f[0] != "devid" || f[2] != "size" || f[4] != "used" || f[6] != "path" {
			continue
		}
		d := DeviceStats{Path: strings.Join(f[7:], " ")}
		var errs [3]error
		d.ID, errs[0] = strconv.ParseInt(f[1], 10, 64)
		d.Size, errs[1] = strconv.ParseInt(f[3], 10, 64)
		d.Used, errs[2] = strconv.ParseInt(f[5], 10, 64)
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("btrfs filesystem show: line %q: %w", lines.Text(), err)
			}
		}
		devices = append(devices, d)
	}
	if len(devices) == 0 {
		return nil, fmt.Errorf("btrfs filesystem show listed no device: %q", out)
	}
	return devices, nil
}

// parseDeviceErrors reads `btrfs --format json device stats`: per devid,
// each *_errs counter.
func parseDeviceErrors(out []byte) (map[int64]map[string]int64, error) {
	var report struct {
		Devices []map[string]string `json:"device-stats"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return nil, fmt.Errorf("btrfs device stats: %w", err)
	}
	errs := map[int64]map[string]int64{}
	for _, d := range report.Devices {
		id, err := strconv.ParseInt(d["devid"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("btrfs device stats: devid %q: %w", d["devid"], err)
		}
		counters := map[string]int64{}
		for key, value := range d {
			if name, ok := strings.CutSuffix(key, "_errs"); ok {
				if counters[name], err = strconv.ParseInt(value, 10, 64); err != nil {
					return nil, fmt.Errorf("btrfs device stats: %s %q: %w", key, value, err)
				}
			}
		}
		errs[id] = counters
	}
	return errs, nil
}
