package dashboard_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/dashboard"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fixture is a cluster to show: node a renews its Lease and its pool is
// full, node b has no Lease, and a claim waits in each of two
// namespaces.
type fixture struct {
	env          *testenv.Env
	mine, not    string
	nodeA, nodeB string
}

// fixtures numbers the fixtures, which the tests make one each.
var fixtures int

func newFixture(t *testing.T) *fixture {
	env := testenv.Get(t)
	ctx := context.Background()
	fixtures++
	id := fmt.Sprintf("%d-%d", os.Getpid(), fixtures)
	f := &fixture{env: env, mine: testenv.Namespace(t, env.Client, "dash-mine-"+id), not: testenv.Namespace(t, env.Client, "dash-not-"+id),
		nodeA: "dash-a-" + id, nodeB: "dash-b-" + id}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dashboard.DefaultLeaseNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	create := func(o client.Object) {
		t.Helper()
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{f.nodeA, f.nodeB} {
		create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	create(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease.Name(f.nodeA), Namespace: dashboard.DefaultLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}})
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: f.mine},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{Name: "fast"}}}}}
	create(cluster)
	cluster.Status.DeviceClassStatuses = []storagev1alpha1.DeviceClassStatus{{Name: "fast", Nodes: []storagev1alpha1.DeviceClassNodeStatus{{
		Node: f.nodeA, VolumeGroup: "fast", State: storagev1alpha1.StateReady, Size: resource.NewQuantity(10<<30, resource.BinarySI),
		Devices:  []string{"/dev/strata/disk-1"},
		ThinPool: &storagev1alpha1.ThinPoolStatus{Name: "pool", DataPercent: "93.20", MetadataPercent: "10.00", Full: "data 93.2% full (threshold 90%): no new thin volumes here"},
	}}}}
	if err := env.Client.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{f.mine, f.not} {
		create(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "waiting", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To("strata-fast"),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	}
	return f
}

// serve runs the dashboard over the API server, its clock two minutes
// ahead so the claims have waited long enough.
func (f *fixture) serve(t *testing.T, auth dashboard.Authorizer) (*httptest.Server, *dashboard.Broker) {
	live := dashboard.NewBroker()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go live.Run(ctx)
	s := &dashboard.Server{Reader: f.env.Client, Auth: auth, Live: live, GitOps: true, Now: func() time.Time { return time.Now().Add(2 * time.Minute) }}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, live
}

func get(t *testing.T, url, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The overview marks what needs a person: the full pool, the node
// without a Lease, the claims waiting; with the security headers.
func TestTheOverviewMarksWhatNeedsAPerson(t *testing.T) {
	f := newFixture(t)
	strataClass(t, f.env.Client, "btrfs-"+f.nodeA, map[string]string{"agentURL": "https://" + f.nodeA + ".lan:8420", "hostNode": f.nodeA,
		"csi.storage.k8s.io/provisioner-secret-name": "btrfs-tenant"})
	srv, _ := f.serve(t, dashboard.Open{})
	resp, body := get(t, srv.URL+"/", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s: %s", resp.Status, body)
	}
	for _, want := range []string{
		`data-node="` + f.nodeA + `"`, `data-mark="pool-full"`, "data 93.2% full", `data-node="` + f.nodeB + `"`,
		`data-mark="no-lease"`, `data-claim="` + f.mine + `/waiting"`, `data-claim="` + f.not + `/waiting"`,
		"<td>/dev/strata/disk-1</td>", `<tr data-btrfs-class="btrfs-` + f.nodeA + `"><td>btrfs-` + f.nodeA + `</td><td>https://` + f.nodeA +
			`.lan:8420 (node-local)</td><td>btrfs-tenant</td><td>0</td></tr>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers %v, or an inline script", resp.Header)
	}
}

// Under Kubernetes authentication, a request without a token is refused,
// and a user who may list claims and LVMClusters in one namespace only
// sees that namespace's.
func TestARestrictedUserSeesOnlyItsNamespaces(t *testing.T) {
	f := newFixture(t)
	c := f.env.Client
	token := viewerToken(t, c, f.mine)
	srv, _ := f.serve(t, &dashboard.Kubernetes{Client: c})
	if resp, _ := get(t, srv.URL+"/", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %s", resp.Status)
	}
	if resp, _ := get(t, srv.URL+"/", "not-a-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("with a bad token: %s", resp.Status)
	}
	resp, body := get(t, srv.URL+"/", token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s: %s", resp.Status, body)
	}
	if !strings.Contains(body, `data-claim="`+f.mine+`/waiting"`) || !strings.Contains(body, `data-mark="pool-full"`) {
		t.Errorf("the viewer does not see its own namespace's claim and pool")
	}
	if strings.Contains(body, f.not+"/waiting") || !strings.Contains(body, "Some namespaces are not shown") {
		t.Errorf("the viewer sees another namespace's claim, or is not told some are hidden")
	}
}

// A page is told of a change through its event stream within 2 s.
func TestAChangeReachesAnOpenPage(t *testing.T) {
	f := newFixture(t)
	srv, live := f.serve(t, dashboard.Open{})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Scan() // the retry line: the stream is open
	start := time.Now()
	live.Changed()
	got := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "event: ") {
				got <- lines.Text()
				return
			}
		}
	}()
	select {
	case e := <-got:
		if e != "event: changed" || time.Since(start) > 2*time.Second {
			t.Fatalf("got %q after %s", e, time.Since(start))
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no change event within 2 s")
	}
}

// A token the API server could not review is answered 503, and the
// failure is not kept: once the API server answers, the same token is
// let in.
func TestAFailedReviewIsNotKept(t *testing.T) {
	f := newFixture(t)
	token := viewerToken(t, f.env.Client, f.mine)
	down := true
	real, err := client.NewWithWatch(f.env.Config, client.Options{Scheme: f.env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(real, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isReview := obj.(*authenticationv1.TokenReview); isReview && down {
				return errors.New("connection refused")
			}
			return c.Create(ctx, obj, opts...)
		}})
	srv, _ := f.serve(t, &dashboard.Kubernetes{Client: c})
	if resp, body := get(t, srv.URL+"/", token); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("with the API server unreachable: %s %s", resp.Status, body)
	}
	down = false
	if resp, body := get(t, srv.URL+"/", token); resp.StatusCode != http.StatusOK {
		t.Fatalf("once the API server answers: %s %s", resp.Status, body)
	}
}
