package dashboard

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/failover/lease"
)

// Overview is the first page: each node with its pools and its Lease,
// and what needs a person.
type Overview struct {
	Nodes []NodeView
	// Pending are the claims Pending for over a minute, in the namespaces
	// the user may list claims in, the oldest maxPending of them;
	// PendingCount counts them all.
	Pending      []ClaimView
	PendingCount int
	// Hidden says some namespaces were left out for the user.
	Hidden bool
	At     time.Time
}

// NodeView is one node.
type NodeView struct {
	Name string
	// LeaseAge is how long ago its agent last renewed its Lease; Stale
	// marks one past the stale time, NoLease a node without one.
	LeaseAge       time.Duration
	Stale, NoLease bool
	Classes        []ClassView
	// Btrfs are the btrfs classes its storage host serves.
	Btrfs []BtrfsClassView
}

// ClassView is one device class on one node.
type ClassView struct {
	Cluster, Name, State, Reason string
	Size, Free                   string
	Devices                      []string
	Pool                         *storagev1alpha1.ThinPoolStatus
	// Mark says the class needs a person: failed, or its pool full.
	Mark bool
}

// ClaimView is one claim.
type ClaimView struct {
	Namespace, Name, Class string
	Age                    time.Duration
}

// staleLease is when a node's Lease counts as stale: a Failover's
// default unreachableAfter.
const staleLease = 15 * time.Second

// maxPending is how many waiting claims the overview lists; the volumes
// page has them all.
const maxPending = 50

// pendingTooLong is how long a claim may wait for its volume before a
// person should look.
const pendingTooLong = time.Minute

// DefaultLeaseNamespace is where the agents renew their nodes' Leases
// unless Server.LeaseNamespace says otherwise.
const DefaultLeaseNamespace = "strata-system"

// overviewOf builds the overview u may see, from the caches.
func (s *Server) overviewOf(ctx context.Context, u User) (Overview, error) {
	now := s.now()
	o := Overview{At: now}
	var nodes corev1.NodeList
	var clusters storagev1alpha1.LVMClusterList
	var leases coordinationv1.LeaseList
	var classes storagev1.StorageClassList
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{&nodes, nil}, {&clusters, nil}, {&leases, []client.ListOption{client.InNamespace(s.leaseNamespace())}}, {&classes, nil}} {
		if err := s.Reader.List(ctx, l.list, append(l.opts, readOnly)...); err != nil {
			return o, err
		}
	}
	claims, err := s.claims(ctx)
	if err != nil {
		return o, err
	}
	perClass := map[string]int{}
	mayListClaims := s.listable(ctx, u, "", "persistentvolumeclaims")
	for _, c := range claims {
		if mayListClaims(c.Namespace) {
			perClass[ptrValue(c.Spec.StorageClassName)]++
		}
	}
	renewed := map[string]time.Time{}
	for _, l := range leases.Items {
		if l.Spec.RenewTime != nil {
			renewed[l.Name] = l.Spec.RenewTime.Time
		}
	}
	for _, n := range nodes.Items {
		v := NodeView{Name: n.Name}
		if at, ok := renewed[lease.Name(n.Name)]; ok {
			v.LeaseAge = now.Sub(at)
			v.Stale = v.LeaseAge > staleLease
		} else {
			v.NoLease = true
		}
		v.Classes = s.classesOn(ctx, u, n.Name, clusters.Items)
		v.Btrfs = btrfsClassesOn(&n, classes.Items, perClass)
		o.Nodes = append(o.Nodes, v)
	}
	o.Pending, o.Hidden = s.pendingClaims(ctx, u, claims, now)
	o.PendingCount = len(o.Pending)
	o.Pending = o.Pending[:min(len(o.Pending), maxPending)]
	return o, nil
}

// classesOn are the device classes on node, of the LVMClusters u may
// list.
func (s *Server) classesOn(ctx context.Context, u User, node string, clusters []storagev1alpha1.LVMCluster) []ClassView {
	var out []ClassView
	for _, c := range clusters {
		if !s.Auth.CanList(ctx, u, storagev1alpha1.GroupVersion.Group, "lvmclusters", c.Namespace) {
			continue
		}
		for _, dc := range c.Status.DeviceClassStatuses {
			for _, st := range dc.Nodes {
				if st.Node != node {
					continue
				}
				v := ClassView{Cluster: c.Namespace + "/" + c.Name, Name: dc.Name, State: st.State, Reason: st.Reason,
					Size: quantity(st.Size), Free: quantity(st.Free), Devices: st.Devices, Pool: st.ThinPool}
				v.Mark = st.State == storagev1alpha1.StateFailed || (st.ThinPool != nil && st.ThinPool.Full != "")
				out = append(out, v)
			}
		}
	}
	return out
}

// pendingClaims are the claims Pending too long in namespaces u may list
// claims in, oldest first; hidden says some namespace was left out.
func (s *Server) pendingClaims(ctx context.Context, u User, claims []*corev1.PersistentVolumeClaim, now time.Time) (out []ClaimView, hidden bool) {
	may := s.listable(ctx, u, "", "persistentvolumeclaims")
	for _, c := range claims {
		if c.Status.Phase != corev1.ClaimPending || now.Sub(c.CreationTimestamp.Time) < pendingTooLong {
			continue
		}
		if !may(c.Namespace) {
			hidden = true
			continue
		}
		class := ""
		if c.Spec.StorageClassName != nil {
			class = *c.Spec.StorageClassName
		}
		out = append(out, ClaimView{Namespace: c.Namespace, Name: c.Name, Class: class, Age: now.Sub(c.CreationTimestamp.Time)})
	}
	slices.SortFunc(out, func(a, b ClaimView) int { return int(b.Age - a.Age) })
	return out, hidden
}

func quantity(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}

func (s *Server) leaseNamespace() string {
	if s.LeaseNamespace == "" {
		return DefaultLeaseNamespace
	}
	return s.LeaseNamespace
}
