package btrfsnode

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/btrfs"
)

// Quota bounds what one tenant may hold; a zero field is no bound.
type Quota struct {
	// VolumeBytes bounds the sum of the tenant's volume sizes, checked
	// on create, clone and expand.
	VolumeBytes int64
	// SnapshotBytes bounds the sum of its snapshots' sizes, and
	// Snapshots their number, checked on snapshot.
	SnapshotBytes int64
	Snapshots     int
}

// total is what the tenant's subvolumes may reference in all, the limit
// of its level-1 qgroup, which the kernel enforces on every write: a
// subvolume a tenant nests inside a volume escapes the volume's own
// quota, never the tenant's once it is adopted.
func (q Quota) total() int64 {
	if q.VolumeBytes == 0 {
		return 0
	}
	return q.VolumeBytes + q.SnapshotBytes
}

// quotaLock serialises, for a tenant with a quota, the check of its
// totals with the change that follows; tenants without one go
// unserialised.
func (s *Store) quotaLock(tenant string) func() {
	if _, ok := s.Quotas[tenant]; !ok {
		return func() {}
	}
	return s.locks.lock(".quota/" + tenant)
}

// checkVolumeQuota refuses to let volume name have size bytes when the
// tenant's volumes, with those being made (reserved), would then be over
// its quota. Call it under the tenant's quota lock.
func (s *Store) checkVolumeQuota(tenant, name string, size int64) error {
	q := s.Quotas[tenant]
	if q.VolumeBytes == 0 {
		return nil
	}
	counted, err := s.volumeSizes(tenant)
	if err != nil {
		return err
	}
	counted[name] = size
	s.reserved.Range(func(k, v any) bool {
		if key := k.(reservation); key.tenant == tenant {
			if _, recorded := counted[key.name]; !recorded {
				counted[key.name] = v.(int64)
			}
		}
		return true
	})
	var total int64
	for _, n := range counted {
		total += n
	}
	if total > q.VolumeBytes {
		return contract.Errorf(contract.NoSpace, "tenant %s: its volumes would be %d bytes, over its quota of %d: delete or shrink others, or ask the agent's admin for more (--tenant-quotas)",
			tenant, total, q.VolumeBytes)
	}
	return nil
}

// volumeSizes returns a copy of the tenant's recorded volume sizes by
// name. They are read from the records once and then kept up to date by
// the store's own changes, so that a quota check does not read every
// record; Run drops them every interval, so that records changed behind
// the agent's back count from then on.
func (s *Store) volumeSizes(tenant string) (map[string]int64, error) {
	s.sizesMu.Lock()
	defer s.sizesMu.Unlock()
	known, ok := s.sizes[tenant]
	if !ok {
		volumes, err := s.records(tenant)
		if err != nil {
			return nil, err
		}
		known = make(map[string]int64, len(volumes))
		for _, v := range volumes {
			known[v.Name] = v.SizeBytes
		}
		if s.sizes == nil {
			s.sizes = map[string]map[string]int64{}
		}
		s.sizes[tenant] = known
	}
	return maps.Clone(known), nil
}

// recordedSize keeps the known sizes in step with a record just written
// (size > 0) or removed (size 0).
func (s *Store) recordedSize(tenant, name string, size int64) {
	s.sizesMu.Lock()
	defer s.sizesMu.Unlock()
	known, ok := s.sizes[tenant]
	switch {
	case !ok: // not read yet: the next read finds the record as it is
	case size > 0:
		known[name] = size
	default:
		delete(known, name)
	}
}

// forgetSizes drops the known sizes; the next quota check reads the
// records again.
func (s *Store) forgetSizes() {
	s.sizesMu.Lock()
	defer s.sizesMu.Unlock()
	s.sizes = nil
}

// reservation names a volume being made, counted against its tenant's
// quota before its record exists.
type reservation struct{ tenant, name string }

// reserveVolume checks a new volume against its tenant's quota and
// counts it until release is called, once its record is written or the
// create failed. The quota lock is held for the check alone, so that a
// tenant's creates make their subvolumes and records at the same time.
func (s *Store) reserveVolume(tenant, name string, size int64) (release func(), err error) {
	defer s.quotaLock(tenant)()
	if err := s.checkVolumeQuota(tenant, name, size); err != nil {
		return nil, err
	}
	key := reservation{tenant, name}
	s.reserved.Store(key, size)
	return func() { s.reserved.Delete(key) }, nil
}

// checkSnapshotQuota refuses one more snapshot of size bytes over the
// tenant's snapshot quota.
func (s *Store) checkSnapshotQuota(tenant string, size int64) error {
	q := s.Quotas[tenant]
	if q.SnapshotBytes == 0 && q.Snapshots == 0 {
		return nil
	}
	snaps, err := s.ListSnapshots(tenant, "")
	if err != nil {
		return err
	}
	total := size
	for _, snap := range snaps {
		total += snap.SizeBytes
	}
	switch {
	case q.Snapshots > 0 && len(snaps)+1 > q.Snapshots:
		return contract.Errorf(contract.NoSpace, "tenant %s: it has %d snapshots, its quota: delete one first (--tenant-quotas)", tenant, len(snaps))
	case q.SnapshotBytes > 0 && total > q.SnapshotBytes:
		return contract.Errorf(contract.NoSpace, "tenant %s: its snapshots would be %d bytes, over its quota of %d: delete one first (--tenant-quotas)", tenant, total, q.SnapshotBytes)
	}
	return nil
}

// tenantGroups is the tenant's level-1 qgroup, made and limited on first
// use, as the list a snapshot joins at creation; none for a tenant
// without a quota.
func (s *Store) tenantGroups(ctx context.Context, tenant string) ([]btrfs.GroupID, error) {
	limit := s.Quotas[tenant].total()
	if limit == 0 {
		return nil, nil
	}
	group := btrfs.GroupFor(s.Base + "/" + tenant)
	if _, done := s.groups.Load(group); !done {
		defer s.locks.lock(".group/" + tenant)() // one maker; the others find it made
		if _, done := s.groups.Load(group); done {
			return []btrfs.GroupID{group}, nil
		}
		if err := s.FS.EnsureGroup(ctx, group, limit); err != nil {
			return nil, fmt.Errorf("tenant %s: its quota group: %w", tenant, err)
		}
		s.groups.Store(group, true)
	}
	return []btrfs.GroupID{group}, nil
}

// joinTenantGroup puts a subvolume of the tenant that shares no data
// (a new volume, or one nested in a volume) in its level-1 qgroup.
func (s *Store) joinTenantGroup(ctx context.Context, tenant, path string) error {
	groups, err := s.tenantGroups(ctx, tenant)
	for _, g := range groups {
		err = s.FS.JoinGroup(ctx, path, g)
	}
	return err
}

// AdoptNested puts the subvolumes nested in the volumes of tenants with
// a quota into their tenant's qgroup, and reports each: a process with a
// volume mounted can make a subvolume in it, which no quota covers until
// it is adopted. Run at start and every sync interval.
func (s *Store) AdoptNested(ctx context.Context) error {
	for tenant, q := range s.Quotas {
		if q.total() == 0 {
			continue
		}
		volumes, err := s.records(tenant)
		if err != nil {
			return err
		}
		for _, v := range volumes {
			data := filepath.Join(s.volumeDir(tenant, v.Name), dataDir)
			nested, err := s.FS.Nested(ctx, data)
			if err != nil {
				return err
			}
			for _, n := range nested {
				if err := s.joinTenantGroup(ctx, tenant, n); err != nil {
					return err
				}
				if _, seen := s.adopted.LoadOrStore(n, true); !seen && s.Notice != nil {
					s.Notice("NestedSubvolume", fmt.Sprintf("subvolume %s was made inside volume %s of tenant %s; it now counts against the tenant's quota", n, v.Name, tenant))
				}
			}
		}
	}
	return nil
}

// ParseQuotas reads "tenant:field=value" pairs separated by commas or new
// lines, the format of --tenant-quotas: fields volumes and snapshots
// (sizes such as 100Gi) and snapshotCount.
func ParseQuotas(s string) (map[string]Quota, error) {
	out := map[string]Quota{}
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, setting, ok := strings.Cut(line, ":")
		field, value, ok2 := strings.Cut(setting, "=")
		name, field, value = strings.TrimSpace(name), strings.TrimSpace(field), strings.TrimSpace(value)
		if !ok || !ok2 {
			return nil, fmt.Errorf("tenant quota %q is not tenant:field=value", line)
		}
		if err := contract.CheckName("tenant", name); err != nil {
			return nil, fmt.Errorf("tenant quota %q: %w", line, err)
		}
		q := out[name]
		switch field {
		case "volumes", "snapshots":
			size, err := resource.ParseQuantity(value)
			if err != nil || size.Sign() <= 0 {
				return nil, fmt.Errorf("tenant quota %q: %q is not a size such as 100Gi", line, value)
			}
			if field == "volumes" {
				q.VolumeBytes = size.Value()
			} else {
				q.SnapshotBytes = size.Value()
			}
		case "snapshotCount":
			n, err := strconv.Atoi(value)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("tenant quota %q: %q is not a positive count", line, value)
			}
			q.Snapshots = n
		default:
			return nil, fmt.Errorf("tenant quota %q: field %q: use volumes, snapshots or snapshotCount", line, field)
		}
		out[name] = q
	}
	return out, nil
}
