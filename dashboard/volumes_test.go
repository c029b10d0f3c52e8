package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/dashboard"
	"github.com/strata-gitops/strata/storage/volumeusage"
)

// claimOf is a claim of class, of size, filled from image when one is
// named.
func claimOf(ns, name, class, size, image string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if image != "" {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To(storagev1alpha1.GroupVersion.Group), Kind: storagev1alpha1.VolumeImageKind, Name: image}
	}
	return c
}

// strataClass makes a StorageClass of strata's CSI driver.
func strataClass(t *testing.T, c client.Client, name string, params map[string]string) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: storagev1alpha1.CSIDriver, Parameters: params}
	if err := c.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), sc) })
}

// The volumes page lists the claims of strata's classes only, with the
// pod using each, its pair and its image; it searches, sorts and cuts
// 10,000 claims into pages of 200.
func TestTheVolumesPageSearchesSortsAndPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.env.Client
	lvm, btrfs := "vol-lvm-"+f.nodeA, "vol-btrfs-"+f.nodeA
	strataClass(t, c, lvm, map[string]string{storagev1alpha1.DeviceClassParameter: "fast"})
	strataClass(t, c, btrfs, map[string]string{"agentURL": "https://10.0.0.1:9443", "hostNode": f.nodeB})
	create := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	create(claimOf(f.mine, "db", lvm, "5Gi", ""))
	create(claimOf(f.mine, "vm-disk", lvm, "20Gi", "debian-13"))
	create(claimOf(f.mine, "shared", btrfs, "1Gi", ""))
	create(claimOf(f.mine, "elsewhere", "standard", "1Gi", ""))
	for i := range 203 {
		create(claimOf(f.not, fmt.Sprintf("bulk-%03d", i), lvm, "1Gi", ""))
	}
	create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ledger-0", Namespace: f.mine}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app"}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db"}}}}}})
	create(&volsyncv1alpha1.ReplicationSource{ObjectMeta: metav1.ObjectMeta{Name: "db-pair", Namespace: f.mine},
		Spec: volsyncv1alpha1.ReplicationSourceSpec{SourcePVC: "db"}})
	srv, _ := f.serve(t, dashboard.Open{})

	_, body := get(t, srv.URL+"/volumes?q="+f.mine, "")
	for _, want := range []string{`data-claim="` + f.mine + `/db"`, "ledger-0", "db-pair", "debian-13", ">btrfs<", ">" + f.nodeB + "<", `data-matched="3"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the volumes page searched for %s lacks %s: %s", f.mine, want, body[strings.Index(body, "<p class=\"count\""):][:200])
		}
	}
	if strings.Contains(body, "elsewhere") {
		t.Error("a claim of another driver's class is shown")
	}
	_, body = get(t, srv.URL+"/volumes?q="+f.mine+"&sort=size&desc=1", "")
	if i, j := strings.Index(body, "/vm-disk\""), strings.Index(body, "/db\""); i < 0 || j < 0 || i > j {
		t.Error("sorted by size, largest first, the 20Gi claim does not come before the 5Gi one")
	}
	_, body = get(t, srv.URL+"/volumes?q=bulk&page=2", "")
	if !strings.Contains(body, "bulk-200") || strings.Contains(body, "bulk-199\"") || strings.Count(body, "<tr data-claim=") != 3 ||
		!strings.Contains(body, `aria-current="page">2</a>`) {
		t.Error("page 2 of 203 claims is not the last 3")
	}
	_, body = get(t, srv.URL+"/volumes?q=bulk", "")
	if n := strings.Count(body, "<tr data-claim="); n != 200 {
		t.Errorf("a page shows %d claims, not 200", n)
	}
}

// A page number past the last, even one whose offset would overflow,
// shows the last page rather than failing; a search longer than any
// name is cut, not matched in full against every claim.
func TestTheVolumesPageTakesHostileQueries(t *testing.T) {
	f := newFixture(t)
	class := "hostile-" + f.nodeA
	strataClass(t, f.env.Client, class, map[string]string{storagev1alpha1.DeviceClassParameter: "fast"})
	if err := f.env.Client.Create(context.Background(), claimOf(f.mine, "db", class, "1Gi", "")); err != nil {
		t.Fatal(err)
	}
	srv, _ := f.serve(t, dashboard.Open{})
	resp, body := get(t, srv.URL+"/volumes?q="+f.mine+"&page=9223372036854775807", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-claim="`+f.mine+`/db"`) {
		t.Fatalf("a page number past the last: %s, want the last page with the claim", resp.Status)
	}
	resp, body = get(t, srv.URL+"/volumes?q="+strings.Repeat("x", 100000), "")
	if resp.StatusCode != http.StatusOK || strings.Count(body, "x") > 1000 {
		t.Errorf("a 100,000-byte search: %s, echoed %d bytes of it", resp.Status, strings.Count(body, "x"))
	}
}

// usageMap is what nodes' kubelets measured, as volumeusage.Reader
// keeps it.
type usageMap map[volumeusage.Claim]volumeusage.Usage

func (m usageMap) Of(c volumeusage.Claim) (volumeusage.Usage, bool) { u, ok := m[c]; return u, ok }

// Each claim shows what its node last measured of it, as bytes and a
// share of its filesystem, and the page sorts by it; a claim no node
// measured shows nothing.
func TestTheVolumesPageShowsWhatIsUsed(t *testing.T) {
	f := newFixture(t)
	c := f.env.Client
	class := "vol-used-" + f.nodeA
	strataClass(t, c, class, map[string]string{storagev1alpha1.DeviceClassParameter: "fast"})
	for _, name := range []string{"measured", "new"} {
		if err := c.Create(context.Background(), claimOf(f.mine, name, class, "10Gi", "")); err != nil {
			t.Fatal(err)
		}
	}
	s := &dashboard.Server{Reader: c, Auth: dashboard.Open{},
		Usage: usageMap{{Namespace: f.mine, Name: "measured"}: {Used: 5 << 30, Capacity: 10 << 30}}}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	_, body := get(t, srv.URL+"/volumes?q="+f.mine+"/&sort=used&desc=1", "")
	measured := strings.Index(body, `data-used="5368709120">5.0 GiB (50 %)</td>`)
	unknown := strings.Index(body, `data-used="-1"></td>`)
	if measured < 0 || unknown < 0 {
		t.Fatalf("the used bytes are not shown:\n%s", body)
	}
	if measured > unknown {
		t.Error("sorted by used, descending, the measured claim is not first")
	}
	if !strings.Contains(body, `data-sort="used" aria-sort="descending"`) {
		t.Error("the used column is not a sort link")
	}
}
