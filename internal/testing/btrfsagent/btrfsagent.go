// Package btrfsagent starts nodes' btrfs volume APIs for the tests of
// what drives them (replication, failover): each a real store on its own
// loop btrfs, served over TLS, with the StorageClass that points at it.
package btrfsagent

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/agenttls"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// Tenant and TenantToken are the tenant of each Agent's store.
const (
	Tenant      = "homelab"
	TenantToken = "homelab-token-0123456789abcdef"
)

// Agent is one node's btrfs volume API, served over TLS from a
// store on its own loop btrfs, and the StorageClass whose volumes it
// holds, as a node's agent and the chart's class are.
type Agent struct {
	Store *btrfsnode.Store
	Srv   *httptest.Server
	Class string
}

// Start starts an agent for node name and creates, in ns, its
// CA Secret, the tenant's token Secret and a StorageClass that trusts it.
func Start(t testing.TB, c client.Client, ns, name string) Agent {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on loop devices")
	ctx := context.Background()
	store, err := btrfsnode.Open(ctx, filepath.Join(testenv.BtrfsDisk(t, 1<<30), "strata"), nil, "node-"+name)
	if err != nil {
		t.Fatal(err)
	}
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{Tenant: TenantToken}); err != nil {
		t.Fatal(err)
	}
	server := volumeapi.New(store, tenants)
	served, err := agenttls.Serve(server.Handler())
	if err != nil {
		t.Fatal(err)
	}
	srv, caPEM := served.Srv, served.CAPEM
	server.PeerHTTP = served.Client
	t.Cleanup(srv.Close)
	objects := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca-" + name}, Data: map[string][]byte{"ca.crt": caPEM}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-" + name},
			StringData: map[string]string{rules.TokenKey: TenantToken}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Provisioner: storagev1alpha1.CSIDriver,
			Parameters: map[string]string{
				rules.AgentURLParameter: srv.URL, rules.AgentCASecretParameter: ns + "/ca-" + name,
				"csi.storage.k8s.io/provisioner-secret-name": "tenant-" + name, "csi.storage.k8s.io/provisioner-secret-namespace": ns,
			}},
	}
	for _, o := range objects {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), objects[2]) })
	return Agent{Store: store, Srv: srv, Class: ns + "-" + name}
}

// Claim makes a volume on the agent and, in ns, a claim bound to it
// through a PV with node affinity to node, as the CSI driver and the PV
// controller would.
func (a Agent) Claim(t testing.TB, c client.Client, ns, name, node string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := a.Store.Create(ctx, Tenant, btrfsnode.CreateRequest{Name: name, SizeBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	testenv.BindClaim(t, c, testenv.Claim{Namespace: ns, Name: name, Node: node, Class: a.Class, Handle: a.Class + "|" + name,
		Attributes: rules.BtrfsVolumeContext(), Size: resource.MustParse("128Mi")})
}

// Write puts size random bytes into file of the agent's volume and
// returns them.
func (a Agent) Write(t testing.TB, volume, file string, size int) []byte {
	t.Helper()
	v, err := a.Store.Get(Tenant, volume)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if err := os.WriteFile(filepath.Join(v.Path, file), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}
