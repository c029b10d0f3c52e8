package release

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/rules"
)

// BtrfsHost is the nodes of the local cluster serving btrfs volumes
// through the chart's btrfs host, each from its own btrfs disk, with one
// tenant.
type BtrfsHost struct {
	// Nodes are the hosts' node names; Base is the btrfs mount inside
	// each.
	Nodes []string
	Base  string
	// Tenant and Token are the one tenant and its token, the same on
	// every host.
	Tenant, Token string
	// TokenSecret is the Secret StorageClasses name for the token (key
	// rules.TokenKey).
	TokenSecret string
}

// BtrfsHostLabel marks the nodes the chart runs a btrfs host on, as
// docs/install.md suggests a cluster mark its storage hosts.
const BtrfsHostLabel = "strata.dev/btrfs-host"

// Labels are the label each host node registers with, by node name
// (cluster.Options.Labels).
func (h BtrfsHost) Labels() map[string]map[string]string {
	labels := map[string]map[string]string{}
	for _, n := range h.Nodes {
		labels[n] = map[string]string{BtrfsHostLabel: "true"}
	}
	return labels
}

// Mounts mount each host's disk at the base (cluster.Options.BtrfsMounts).
func (h BtrfsHost) Mounts(disk int) map[string]map[string]int {
	mounts := map[string]map[string]int{}
	for _, n := range h.Nodes {
		mounts[n] = map[string]int{h.Base: disk}
	}
	return mounts
}

// tenantsSecret holds the host's tenants and their tokens.
const tenantsSecret = "btrfs-tenants"

// Values are the chart values that run the host. This machine's kernel has
// no NFS client, so no node could mount the host's exports: the agent
// exports nothing (exporter none; it still records each volume's
// clients), and the CSI node service bind-mounts volumes on the host
// itself. Ganesha's paths stay in the node's own directory, away from
// the machine's /etc and /run, which the nodes share.
func (h BtrfsHost) Values() []string {
	return []string{
		"btrfsHost.enabled=true",
		"btrfsHost.nodeSelector." + strings.ReplaceAll(BtrfsHostLabel, ".", `\.`) + "=true",
		"btrfsHost.base=" + h.Base,
		"btrfsHost.exporter=none",
		"btrfsHost.ganeshaExports=/var/lib/strata/ganesha/strata-exports.conf",
		"btrfsHost.ganeshaPIDFile=/var/lib/strata/ganesha/ganesha.pid",
		"btrfsHost.tenantsSecret=" + tenantsSecret,
	}
}

// Secrets are the host's tenants Secret and the tenant's token Secret,
// to be made in the release namespace before the chart is installed.
func (h BtrfsHost) Secrets(namespace string) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tenantsSecret, Namespace: namespace},
			StringData: map[string]string{h.Tenant: h.Token}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: h.TokenSecret, Namespace: namespace},
			StringData: map[string]string{rules.TokenKey: h.Token}},
	}
}

// CASecret is the Secret, namespace/name, holding the CA the host's agent
// certificate chains to (the chart makes it).
func CASecret(namespace string) string { return namespace + "/strata-agent-ca-public" }
