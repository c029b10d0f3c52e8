package csi

import (
	"context"

	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/csi/backend"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
	"github.com/strata-gitops/strata/storage/csi/lvmbackend"
)

var (
	_ backend.Controller = (*lvmbackend.Controller)(nil)
	_ backend.Controller = (*btrfsbackend.Controller)(nil)
	_ backend.Node       = lvmbackend.Node{}
	_ backend.Node       = btrfsbackend.Node{}
)

// backends are every backend, for the calls that list what all hold.
func (c *Controller) backends() []backend.Controller {
	return []backend.Controller{c.lvm, c.btrfs}
}

// byParameters is the backend of a class, by its parameters.
func (c *Controller) byParameters(params map[string]string) backend.Controller {
	if rules.IsBtrfsClass(params) {
		return c.btrfs
	}
	return c.lvm
}

// byID is the backend of the class a volume or snapshot ID names.
func (c *Controller) byID(ctx context.Context, volumeID string, secrets map[string]string) (backend.Controller, backend.VolumeID, error) {
	id, btrfs, err := c.btrfs.Route(ctx, volumeID, secrets)
	switch {
	case err != nil:
		return nil, id, err
	case btrfs:
		return c.btrfs, id, nil
	}
	return c.lvm, id, nil
}

// byContext is the node backend of a volume, by its volume context.
func (n *Node) byContext(volumeContext map[string]string) backend.Node {
	if rules.IsBtrfsVolume(volumeContext) {
		return n.btrfs()
	}
	return n.lvm()
}

// byMount is the node backend of the volume mounted at path.
func (n *Node) byMount(volumeID, path string) (backend.Node, error) {
	btrfs, err := btrfsbackend.IsMount(volumeID, path)
	switch {
	case err != nil:
		return nil, err
	case btrfs:
		return n.btrfs(), nil
	}
	return n.lvm(), nil
}

func (n *Node) lvm() backend.Node {
	return lvmbackend.Node{Agent: n.Agent, Mounter: n.Mounter, Pods: n.Pods}
}

func (n *Node) btrfs() backend.Node {
	return btrfsbackend.Node{Name: n.Name, Base: n.BtrfsBase, Mounter: n.Mounter}
}
