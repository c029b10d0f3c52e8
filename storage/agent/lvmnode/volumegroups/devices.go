package volumegroups

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/disks"
	"github.com/strata-gitops/strata/storage/lvm"
)

// usableDevices inspects the class's devices, wipes those the opt-in
// allows (once each) and returns the ones to put in the group. A required
// path that cannot be used fails the class.
func (r *Reconciler) usableDevices(ctx context.Context, cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass,
	node *storagev1alpha1.NodeStatus, st *storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	sel := dc.DeviceSelector
	if sel == nil {
		sel = &storagev1alpha1.DeviceSelector{}
	}
	groups, err := r.LVM.VolumeGroups(ctx)
	if err != nil {
		return nil, err
	}
	policy := disks.Policy{MinSize: r.minSize(), ManagedTag: ManagedTag}
	if len(sel.Paths)+len(sel.OptionalPaths) == 0 {
		if sel.DiscoverBlankDisks == nil || !*sel.DiscoverBlankDisks {
			return nil, fmt.Errorf("device class %s names no disks: list them in deviceSelector.paths (by id, /dev/disk/by-id/...), "+
				"or set deviceSelector.discoverBlankDisks: true to take every blank disk of the node", dc.Name)
		}
		return r.discovered(ctx, dc, policy, groups, st)
	}
	return r.selected(ctx, cluster, dc, sel, policy, groups, node, st)
}

// selected inspects the paths the class names: a required one that is
// missing or refused fails the class; a refused one is wiped when the
// class allows it and a wipe cures it, once per device.
func (r *Reconciler) selected(ctx context.Context, cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass,
	sel *storagev1alpha1.DeviceSelector, policy disks.Policy, groups []lvm.VolumeGroup,
	node *storagev1alpha1.NodeStatus, st *storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	force := sel.ForceWipeDevicesAndDestroyAllData != nil && *sel.ForceWipeDevicesAndDestroyAllData
	var usable, missingRequired []string
	consider := func(path string, required bool) error {
		d, problem := r.inspect(ctx, path)
		if problem != "" {
			if problem != notFound { // there, but not readable as a disk
				st.Excluded = append(st.Excluded, storagev1alpha1.ExcludedDevice{Name: path, Reasons: []string{problem}})
			}
			if required {
				missingRequired = append(missingRequired, path+": "+problem)
			}
			return nil // an absent optional path is simply not used yet
		}
		if d.VolumeGroup == dc.Name {
			return nil // already in the group
		}
		why := disks.Refusals(d, policy, groups)
		if len(why) > 0 && force && len(disks.Refusals(d, withForce(policy), groups)) == 0 {
			if wipedBefore(node, d) {
				why = append(why, "wiped once before and holds data again; strata wipes a device only once")
			} else {
				var err error
				if why, err = r.wipe(ctx, cluster, d, node); err != nil {
					return err
				}
			}
		}
		if len(why) > 0 {
			st.Excluded = append(st.Excluded, storagev1alpha1.ExcludedDevice{Name: path, Reasons: why})
			if required {
				missingRequired = append(missingRequired, path+": "+strings.Join(why, "; "))
			}
			return nil
		}
		usable = append(usable, d.Path)
		return nil
	}
	for _, p := range sel.Paths {
		if err := consider(string(p), true); err != nil {
			return nil, err
		}
	}
	for _, p := range sel.OptionalPaths {
		if err := consider(string(p), false); err != nil {
			return nil, err
		}
	}
	if len(missingRequired) > 0 {
		return nil, fmt.Errorf("required devices cannot be used: %s", strings.Join(missingRequired, "; "))
	}
	return usable, nil
}

const notFound = "not found"

// inspect reads the device at path, or says why it cannot: notFound, or
// why what is there cannot be read as a disk.
func (r *Reconciler) inspect(ctx context.Context, path string) (disks.Device, string) {
	found, err := r.Disks.Devices(ctx, path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && len(found) == 0:
		return disks.Device{}, notFound
	case err != nil:
		return disks.Device{}, "cannot be inspected: " + err.Error()
	}
	return found[0], ""
}

// unselected lists the group's devices that the class's paths no longer
// name. A class without paths names none, so it has none.
func unselected(dc storagev1alpha1.DeviceClass, devices []string) []string {
	sel := dc.DeviceSelector
	if sel == nil || len(sel.Paths)+len(sel.OptionalPaths) == 0 {
		return nil
	}
	named := map[string]bool{}
	for _, p := range append(slices.Clone(sel.Paths), sel.OptionalPaths...) {
		named[string(p)] = true
		if real, err := filepath.EvalSymlinks(string(p)); err == nil {
			named[real] = true
		}
	}
	var out []string
	for _, d := range devices {
		if !named[d] {
			out = append(out, d)
		}
	}
	return out
}

// discovered picks, for a class that opts in to discovery, every blank
// disk of the node: no partitions, signatures, mounts, holders or loop
// mappings, and neither / nor /boot on it. A disk joins the group by its
// /dev/disk/by-id path where udev made one. It is never wiped, whatever forceWipeDevicesAndDestroyAllData
// says: only a disk named in Git is. Each disk looked at and not taken is
// listed with why.
func (r *Reconciler) discovered(ctx context.Context, dc storagev1alpha1.DeviceClass, policy disks.Policy,
	groups []lvm.VolumeGroup, st *storagev1alpha1.DeviceClassNodeStatus) ([]string, error) {
	found, err := r.Disks.Candidates(ctx, r.DiscoverLoopDir)
	if err != nil {
		return nil, err
	}
	policy.Discovered = true
	var usable []string
	for _, d := range found {
		if d.VolumeGroup == dc.Name {
			continue // already in the group
		}
		if why := disks.Refusals(d, policy, groups); len(why) > 0 {
			st.Excluded = append(st.Excluded, storagev1alpha1.ExcludedDevice{Name: d.Path, Reasons: why})
			continue
		}
		usable = append(usable, cmp.Or(d.StablePath, d.Path))
	}
	return usable, nil
}

func withForce(p disks.Policy) disks.Policy {
	p.ForceWipe = true
	return p
}

// wipedBefore says whether d was wiped on this node before. Wipes are
// remembered by the disk's stable ID: after a reboot /dev/sdb may be
// another disk, and the wiped one /dev/sdc. A record without an ID (from
// before IDs were kept) matches by path.
func wipedBefore(node *storagev1alpha1.NodeStatus, d disks.Device) bool {
	return slices.ContainsFunc(node.Wiped, func(w storagev1alpha1.WipedDevice) bool {
		if w.ID != "" {
			return w.ID == d.StableID
		}
		return w.Device == d.Path
	})
}

// wipe erases a device's signatures and records the wipe first-hand.
func (r *Reconciler) wipe(ctx context.Context, cluster *storagev1alpha1.LVMCluster, d disks.Device,
	node *storagev1alpha1.NodeStatus) ([]string, error) {
	removed, err := r.Disks.Wipe(ctx, d)
	if err != nil {
		return nil, err
	}
	node.Wiped = append(node.Wiped, storagev1alpha1.WipedDevice{Device: d.Path, ID: d.StableID, At: metav1.Now(), Signatures: removed})
	r.event(cluster, corev1.EventTypeWarning, "DeviceWiped", "wiped %s on %s (forceWipeDevicesAndDestroyAllData): removed %s",
		d.Path, r.Node, strings.Join(removed, ", "))
	return nil, nil
}
