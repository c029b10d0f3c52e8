package dashboard

import (
	"net/url"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/rules"
)

// BtrfsClassView is a btrfs class served by a node's btrfs storage host:
// its agent, its tenant (the class's provisioner Secret) and how many
// claims it has.
type BtrfsClassView struct {
	Class, Agent, Tenant string
	// NodeLocal: its volumes are used on this node alone (hostNode);
	// otherwise they are reached over NFS from any node.
	NodeLocal bool
	Claims    int
}

// provisionerSecret names a class's tenant: the Secret holding its token.
const provisionerSecret = "csi.storage.k8s.io/provisioner-secret-name"

// btrfsClassesOn are the btrfs classes node hosts: those pinned to it by
// hostNode, and those whose agent's host is one of its addresses.
func btrfsClassesOn(node *corev1.Node, classes []storagev1.StorageClass, claimsOf map[string]int) []BtrfsClassView {
	var out []BtrfsClassView
	for _, sc := range classes {
		if sc.Provisioner != storagev1alpha1.CSIDriver || !rules.IsBtrfsClass(sc.Parameters) {
			continue
		}
		agent := sc.Parameters[rules.AgentURLParameter]
		host := ""
		if u, err := url.Parse(agent); err == nil {
			host = u.Hostname()
		}
		local := sc.Parameters[rules.HostNodeParameter] == node.Name
		if !local && !slices.ContainsFunc(node.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == host }) {
			continue
		}
		out = append(out, BtrfsClassView{Class: sc.Name, Agent: agent, Tenant: sc.Parameters[provisionerSecret], NodeLocal: local, Claims: claimsOf[sc.Name]})
	}
	return out
}
