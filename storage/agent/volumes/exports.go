package volumes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-gitops/strata/storage/nfs"
)

// AddExport lets an NFS client (an IP or CIDR) mount the volume.
func (s *Store) AddExport(ctx context.Context, tenant, name, client string) (Volume, error) {
	return s.changeClients(ctx, tenant, name, client, func(clients []string) []string {
		if slices.Contains(clients, client) {
			return clients
		}
		return append(clients, client)
	})
}

// RemoveExport takes an NFS client's access away; removing one that has
// none is done.
func (s *Store) RemoveExport(ctx context.Context, tenant, name, client string) (Volume, error) {
	return s.changeClients(ctx, tenant, name, client, func(clients []string) []string {
		return slices.DeleteFunc(clients, func(c string) bool { return c == client })
	})
}

func (s *Store) changeClients(ctx context.Context, tenant, name, client string, change func([]string) []string) (Volume, error) {
	if err := CheckName("volume", name); err != nil {
		return Volume{}, err
	}
	if err := nfs.CheckClient(client); err != nil {
		return Volume{}, invalid("%v", err)
	}
	if s.Exporter == nil {
		return Volume{}, invalid("this agent serves no NFS exports (start it with an exporter)")
	}
	defer s.locks.lock(tenant + "/" + name)()
	v, err := s.get(tenant, name)
	if err != nil {
		return Volume{}, err
	}
	return s.setClients(ctx, tenant, v, change(slices.Clone(v.Clients)))
}

// setClients records a volume's clients and serves the exports that
// follow. The record comes first: should serving fail, the periodic
// sync (Run) keeps trying what the record says.
func (s *Store) setClients(ctx context.Context, tenant string, v Volume, clients []string) (Volume, error) {
	s.exports.Lock()
	defer s.exports.Unlock()
	slices.Sort(clients)
	v.Clients = clients
	if len(clients) > 0 && v.ExportID == 0 {
		id, err := s.freeExportID()
		if err != nil {
			return Volume{}, err
		}
		v.ExportID = id
	}
	if err := writeMetadata(s.volumeDir(tenant, v.Name), stored(v)); err != nil {
		return Volume{}, err
	}
	if err := s.syncExports(ctx); err != nil {
		return Volume{}, fmt.Errorf("volume %s: recorded its NFS clients, but serving them failed (the agent keeps trying): %w", v.Name, err)
	}
	return s.fill(tenant, v), nil
}

// freeExportID is the lowest export ID no volume holds. Volumes keep
// their ID once given, so a client's file handles stay valid.
func (s *Store) freeExportID() (uint16, error) {
	used := map[uint16]bool{}
	err := s.eachVolume(func(_ string, v Volume) { used[v.ExportID] = true })
	if err != nil {
		return 0, err
	}
	for id := uint16(1); id != 0; id++ {
		if !used[id] {
			return id, nil
		}
	}
	return 0, newError(NoSpace, "all 65535 NFS export IDs are taken")
}

func (s *Store) eachVolume(do func(tenant string, v Volume)) error {
	tenants, err := s.Tenants()
	if err != nil {
		return err
	}
	for _, t := range tenants {
		volumes, err := s.List(t)
		if err != nil {
			return err
		}
		for _, v := range volumes {
			do(t, v)
		}
	}
	return nil
}

// export is the NFS export of a volume: NFSv4 path /{tenant}/{volume}.
func (s *Store) export(tenant string, v Volume) nfs.Export {
	return nfs.Export{ID: v.ExportID, Path: v.Path, Pseudo: "/" + tenant + "/" + v.Name, Clients: v.Clients}
}

// SyncExports serves exactly the exports the volumes' metadata records,
// which also removes exports of volumes that are gone.
func (s *Store) SyncExports(ctx context.Context) error {
	if s.Exporter == nil {
		return nil
	}
	s.exports.Lock()
	defer s.exports.Unlock()
	return s.syncExports(ctx)
}

func (s *Store) syncExports(ctx context.Context) error {
	exports := []nfs.Export{}
	err := s.eachVolume(func(tenant string, v Volume) {
		if len(v.Clients) > 0 {
			exports = append(exports, s.export(tenant, v))
		}
	})
	if err != nil {
		return err
	}
	return s.Exporter.Sync(ctx, exports)
}

// Run brings the exports and the layout in order at start, then keeps
// the exports in sync every interval until ctx ends: a restarted NFS
// server, or one changed by hand, is put back. A failed sync is retried
// sooner, backing off from a second up to the interval.
func (s *Store) Run(ctx context.Context, interval time.Duration, log logr.Logger) {
	if err := s.Sweep(ctx); err != nil {
		log.Error(err, "clearing what a crash left in the volume layout")
	}
	backoff := time.Second
	for {
		wait := interval
		if err := s.SyncExports(ctx); err != nil {
			log.Error(err, "serving NFS exports; retrying", "in", backoff)
			wait, backoff = backoff, min(2*backoff, interval)
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
