package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/nfs"
)

// BtrfsOptions configure the btrfs side of a node's agent.
type BtrfsOptions struct {
	// Base is the directory on btrfs that holds the tenants' volumes;
	// empty serves no btrfs volumes.
	Base   string
	Listen string
	// TenantNetworks is tenant:CIDR pairs: where each tenant's NFS
	// clients may be (volumeapi.ParseNetworks).
	TenantNetworks string
	// TenantQuotas is tenant:field=value pairs (btrfsnode.ParseQuotas).
	TenantQuotas string
	// Exporter is ganesha, kernel or none.
	Exporter       string
	GaneshaExports string
	GaneshaPID     string
	// FullPercent is the used space past which the filesystem is told
	// full (btrfsnode.Fullness); 0 takes 90.
	FullPercent float64
}

// exporter returns the NFS exporter the options name.
func (o BtrfsOptions) exporter() (nfs.Exporter, error) {
	switch o.Exporter {
	case "ganesha":
		return &nfs.Ganesha{ExportsFile: o.GaneshaExports, PIDFile: o.GaneshaPID}, nil
	case "kernel":
		return nfs.NewKernel(o.Base), nil
	case "none", "":
		return nil, nil
	}
	return nil, fmt.Errorf("--exporter %q: use ganesha, kernel or none", o.Exporter)
}

// openedStore is the btrfs backend once the volume API has opened it,
// which it does as it starts; until then there is nothing to fence.
type openedStore struct {
	atomic.Pointer[btrfsnode.Store]
}

func (s *openedStore) FencePairs(ctx context.Context) ([]string, error) {
	if store := s.Load(); store != nil {
		return store.FencePairs(ctx)
	}
	return nil, nil
}

// addBtrfs adds the btrfs side: the volume API over the base.
func (a *Agent) addBtrfs(o Options) {
	store := &openedStore{}
	a.fencers = append(a.fencers, store)
	a.run(func(ctx context.Context) error { return a.serveVolumes(ctx, o, store) })
}

// serveVolumes opens the btrfs backend, with its sweep of what a crash
// left, and serves its volume API until ctx ends.
func (a *Agent) serveVolumes(ctx context.Context, o Options, opened *openedStore) error {
	exporter, err := o.Btrfs.exporter()
	if err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("volumes")
	store, err := btrfsnode.Open(ctx, o.Btrfs.Base, exporter, o.Node)
	if err != nil {
		return err
	}
	served, err := o.served(ctx, a.reader, a.client)
	if err != nil {
		return err
	}
	networks, err := volumeapi.ParseNetworks(o.Btrfs.TenantNetworks)
	if err != nil {
		return fmt.Errorf("--tenant-networks: %w", err)
	}
	if store.Quotas, err = btrfsnode.ParseQuotas(o.Btrfs.TenantQuotas); err != nil {
		return fmt.Errorf("--tenant-quotas: %w", err)
	}
	store.Notice = a.notice(o, logger, warningEventType)
	full := &btrfsnode.Fullness{Base: store.Base, Percent: o.Btrfs.FullPercent, Notice: store.Notice}
	go func() { _ = full.Run(ctx) }()
	opened.Store(store)
	go store.Run(ctx, o.API.SyncInterval, slices.Sorted(maps.Keys(served.byTenant)), logger)
	go reloadTenants(ctx, served.tenants, served.load, o.API.SyncInterval, logger)
	logger.Info("serving the volume API", "listen", o.Btrfs.Listen, "tls", served.tls != nil, "base", store.Base, "exporter", o.Btrfs.Exporter, "tenants", len(served.byTenant))
	server := volumeapi.New(store, served.tenants)
	server.Networks, server.PeerHTTP, server.Peers = networks, served.peerHTTP, served.peers(a.reader)
	if o.Images.Dir != "" {
		if server.Images, err = o.Images.open(ctx, a.reader, provision.BtrfsVolumes{Store: store}, a.notice(o, logger, imageEventType)); err != nil {
			return err
		}
	}
	return serve(ctx, o.Btrfs.Listen, served, server)
}
