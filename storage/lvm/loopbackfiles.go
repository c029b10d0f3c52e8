package lvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/internal/loopdev"
)

// attached returns the loop device backed by file, if any. The device
// last seen for the file is checked first, which spares reading every
// loop device's backing file.
func (l *Loopback) attached(_ context.Context, file string) (string, error) {
	if dev, ok := l.devices.Load(file); ok && loopdev.Backs(dev.(string), file) {
		return dev.(string), nil
	}
	dev, err := loopdev.Find(file)
	if dev != "" {
		l.devices.Store(file, dev)
	}
	return dev, err
}

func (l *Loopback) image(vg, name string) string { return filepath.Join(l.Dir, vg, name+".img") }

func (l *Loopback) recordPath(vg, name string) string { return filepath.Join(l.Dir, vg, name+".json") }

func (l *Loopback) createImage(ctx context.Context, vg, name string, size uint64) error {
	if err := os.MkdirAll(filepath.Join(l.Dir, vg), 0o700); err != nil {
		return err
	}
	img := l.image(vg, name)
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	fresh := err == nil
	if errors.Is(err, os.ErrExist) { // left by a create that crashed
		f, err = os.OpenFile(img, os.O_WRONLY|os.O_TRUNC, 0o600)
	}
	if err != nil {
		return err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if fresh {
		return l.activate(ctx, img)
	}
	return nil
}

// activate attaches a volume file that is not attached, as
// lvcreate activates a new volume.
func (l *Loopback) activate(ctx context.Context, img string) error {
	out, err := l.Runner.Run(ctx, "losetup", "--find", "--show", img)
	if err != nil {
		return err
	}
	dev := strings.TrimSpace(string(out))
	if err := loopdev.Writable(dev); err != nil {
		return err
	}
	l.devices.Store(img, dev)
	return nil
}

func (l *Loopback) writeRecord(vg string, r record) error {
	if err := os.MkdirAll(filepath.Join(l.Dir, vg), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(l.recordPath(vg, r.Name), data)
}

func (l *Loopback) record(vg, name string) (record, error) {
	data, err := os.ReadFile(l.recordPath(vg, name))
	if errors.Is(err, os.ErrNotExist) {
		return record{}, named(ErrNotFound, "logical volume %s/%s", vg, name)
	}
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, fmt.Errorf("record of logical volume %s/%s (%s) is unreadable: %w", vg, name, l.recordPath(vg, name), err)
	}
	return r, nil
}

// records lists a group's volumes, sorted by name.
func (l *Loopback) records(vg string) ([]record, error) {
	entries, err := os.ReadDir(filepath.Join(l.Dir, vg))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []record
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		r, err := l.record(vg, name)
		if errors.Is(err, ErrNotFound) {
			// Removed since the listing: lvs reports a consistent state,
			// and a listing that failed whenever a volume went beside it
			// made the agent drop the group's capacity for a while.
			continue
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, nil
}
