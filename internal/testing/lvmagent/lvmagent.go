// Package lvmagent starts nodes' LVM pair APIs for the tests of what
// drives them (replication, failover): each a real volume group with a
// thin pool on a loop disk, its pairs served on the node's own loopback
// address, with the Node and the controller's token Secret the
// controller finds it by (lvmagents.Agents).
package lvmagent

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/failover/lvmagents"
	"github.com/strata-gitops/strata/internal/testing/lvmtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/thingroup"
	"github.com/strata-gitops/strata/storage/agent/lvmnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Tenant and Token are the controller's tenant on every agent.
const (
	Tenant = "strata"
	Token  = "strata-controller-token-0123456789"
)

// Agent is one node's LVM pair API and its volume group.
type Agent struct {
	Node  string
	Group string
	LVM   lvm.Manager
	Store *lvmnode.Store
}

// Cluster is the agents of a test and how the controller finds them.
type Cluster struct {
	Port   int
	Tokens client.ObjectKey
}

// NewCluster picks a port for the agents and creates, in ns, the Secret
// of the controller's token.
func NewCluster(t testing.TB, c client.Client, ns string) Cluster {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-pairs"}, StringData: map[string]string{Tenant: Token}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	return Cluster{Port: port, Tokens: client.ObjectKeyFromObject(secret)}
}

// Agents is the controller's resolver for these agents.
func (cl Cluster) Agents(c client.Client, others lvmagents.Others) *lvmagents.Agents {
	return &lvmagents.Agents{Client: c, Port: cl.Port, Tokens: cl.Tokens, Timeout: 30 * time.Second, Others: others}
}

// Start starts the agent of node on loopback address ip, with the
// volume group group, and creates the Node with that address.
func (cl Cluster) Start(t testing.TB, c client.Client, node, ip, group string) Agent {
	t.Helper()
	a := Agent{Node: node, Group: group, LVM: thingroup.New(t, group, 256<<20, 192<<20)}
	a.Store = &lvmnode.Store{LVM: a.LVM, Dir: t.TempDir()}
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{Tenant: Token}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(cl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	pairs := volumeapi.NewPairServer(a.Store, tenants)
	pairs.Peers.PlainHTTP = true // served over plain HTTP, as its peers are
	srv := &http.Server{Handler: pairs.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	ctx := context.Background()
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.Node}}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	obj.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if err := c.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	return a
}

// Claim makes a thin volume on the agent's node with its LogicalVolume,
// a PV pinned to the node, and the claim bound to it, in ns.
func (a Agent) Claim(t testing.TB, c client.Client, ns, claim string, size int64) {
	t.Helper()
	ctx := context.Background()
	if err := a.LVM.CreateVolume(ctx, a.Group, lvm.VolumeSpec{Name: claim, Size: uint64(size), Pool: thingroup.Pool, Tags: []string{storagev1alpha1.LogicalVolumeTag(claim)}}); err != nil {
		t.Fatal(err)
	}
	q := *resource.NewQuantity(size, resource.BinarySI)
	lv := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: claim, NodeName: a.Node, DeviceClass: a.Group, Size: q}}
	if err := c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), lv) })
	class := "lvm-" + a.Group
	testenv.BindClaim(t, c, testenv.Claim{Namespace: ns, Name: claim, Node: a.Node, Class: class, Handle: class + "|" + lv.Name, Size: q})
}

// Write writes size random bytes at off into a volume and returns them.
func (a Agent) Write(t testing.TB, volume string, off int64, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	f := a.device(t, volume, os.O_WRONLY)
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return data
}

// Read reads size bytes at off of a volume.
func (a Agent) Read(t testing.TB, volume string, off int64, size int) []byte {
	t.Helper()
	f := a.device(t, volume, os.O_RDONLY)
	defer f.Close()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, off); err != nil {
		t.Fatal(err)
	}
	return data
}

func (a Agent) device(t testing.TB, volume string, flag int) *os.File {
	t.Helper()
	return lvmtest.Open(t, a.LVM, a.Group, volume, flag)
}
