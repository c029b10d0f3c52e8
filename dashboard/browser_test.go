package dashboard_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/dashboard"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/browser"
)

// serveFromCache runs the dashboard as the controller does: read from an
// informer cache over the API server, its open pages told of changes by
// the informers.
func (f *fixture) serveFromCache(t *testing.T, auth dashboard.Authorizer) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := cache.New(f.env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	live := dashboard.NewBroker()
	if err := dashboard.Watch(ctx, c, live, true, dashboard.DefaultLeaseNamespace); err != nil {
		t.Fatal(err)
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	// The fixture's database claim measured by its node, as the kubelets report it.
	used := usageMap{{Namespace: f.mine, Name: "db"}: {Used: 1288490189, Capacity: 5 << 30}}
	s := &dashboard.Server{Reader: c, Auth: auth, Live: live, GitOps: true, Usage: used, Now: func() time.Time { return time.Now().Add(2 * time.Minute) }}
	go func() { _ = s.Start(ctx) }()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// count is how many elements the page has that match a CSS selector.
func count(t *testing.T, tab context.Context, selector string) int {
	t.Helper()
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", selector)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// open loads a view in the tab and keeps its screenshot when
// STRATA_SCREENSHOTS names a directory (make screenshots).
func open(t *testing.T, tab context.Context, url, shot string) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("STRATA_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shot+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Headless Chromium loads every view from the informers' cache and finds
// what the fixture made: a full pool marked, a cycle drawn, a Failover's
// four steps; a claim made after the volumes page loaded appears without
// a reload within 2 s.
func TestTheDashboardInABrowser(t *testing.T) {
	f := newFixture(t)
	makeGraph(t, f)
	makeFailover(t, f)
	class := "browser-" + f.nodeA
	strataClass(t, f.env.Client, class, map[string]string{storagev1alpha1.DeviceClassParameter: "fast"})
	if err := f.env.Client.Create(context.Background(), claimOf(f.mine, "db", class, "5Gi", "")); err != nil {
		t.Fatal(err)
	}
	url := f.serveFromCache(t, dashboard.Open{})
	tab := browser.ForTest(t)

	open(t, tab, url+"/", "overview")
	if count(t, tab, fmt.Sprintf(`[data-node=%q] [data-mark="pool-full"]`, f.nodeA)) != 1 ||
		count(t, tab, fmt.Sprintf(`[data-node=%q] [data-mark="no-lease"]`, f.nodeB)) != 1 {
		t.Error("the overview does not mark node a's full pool and node b's missing Lease")
	}
	open(t, tab, url+"/gitops", "gitops")
	mine := fmt.Sprintf(`[data-ks^=%q]`, f.mine+"/")
	if count(t, tab, `svg.graph g.ks[data-cycle="true"]`+mine) != 2 || count(t, tab, fmt.Sprintf(`svg.graph line.edge.cycle[data-to^=%q]`, f.mine+"/")) != 2 ||
		count(t, tab, "svg.graph g.ks"+mine) != 4 {
		t.Error("the graph does not draw four Kustomizations with a cycle of two")
	}
	open(t, tab, url+"/failovers", "failovers")
	steps, err := chromedp.Run(tab, chromedp.Evaluate[[]string](fmt.Sprintf(
		`[...document.querySelectorAll('[data-failover=%q] li[data-step]')].map(li => li.dataset.step)`, f.mine+"/ledger")))
	if err != nil || fmt.Sprint(steps) != "[detected fenced promoted ready]" {
		t.Errorf("the ledger's timeline shows %v (%v), want its four steps", steps, err)
	}
	open(t, tab, url+"/buildbarn", "buildbarn")
	open(t, tab, url+"/volumes?q="+f.mine, "volumes")
	if count(t, tab, fmt.Sprintf(`tr[data-claim=%q]`, f.mine+"/db")) != 1 {
		t.Fatal("the volumes page does not list the claim")
	}
	made := time.Now()
	if err := f.env.Client.Create(context.Background(), claimOf(f.mine, "made-after-load", class, "1Gi", "")); err != nil {
		t.Fatal(err)
	}
	selector := fmt.Sprintf(`tr[data-claim=%q]`, f.mine+"/made-after-load")
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](fmt.Sprintf("document.querySelector(%q) !== null", selector),
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(2*time.Second))); err != nil {
		t.Fatalf("a claim made after the page loaded did not appear within 2 s: %v", err)
	}
	t.Logf("a claim made after load appeared %s later", time.Since(made).Round(time.Millisecond))
}

// A user who may list one namespace's claims sees, in the browser, that
// namespace's waiting claim and not the other's, and is told some are
// hidden; without a token the page is refused.
func TestARestrictedUserInABrowser(t *testing.T) {
	f := newFixture(t)
	c := f.env.Client
	token := viewerToken(t, c, f.mine)
	url := f.serveFromCache(t, &dashboard.Kubernetes{Client: c})
	tab := browser.ForTest(t)

	open(t, tab, url+"/", "")
	if count(t, tab, "[data-node]") != 0 {
		t.Fatal("the overview answered without a token")
	}
	// As an authenticating proxy in front of the dashboard does: every
	// request of the page, its script's included, carries the token.
	if err := chromedp.Do(tab, chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, network.Enable, network.EnableParams{})
		if err == nil {
			_, err = cdp.Call(ctx, target, network.SetExtraHTTPHeaders,
				network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}})
		}
		return err
	})); err != nil {
		t.Fatal(err)
	}
	open(t, tab, url+"/", "")
	if count(t, tab, fmt.Sprintf(`[data-claim=%q]`, f.mine+"/waiting")) != 1 || count(t, tab, fmt.Sprintf(`[data-claim=%q]`, f.not+"/waiting")) != 0 {
		t.Error("the viewer does not see its own namespace's claim only")
	}
	if count(t, tab, "p.hidden") != 1 {
		t.Error("the viewer is not told some namespaces are hidden")
	}
}

// viewerToken is a token of a ServiceAccount that may list claims and
// LVMClusters in ns only.
func viewerToken(t *testing.T, c client.Client, ns string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer", Namespace: ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "view-storage", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"list"}},
		{APIGroups: []string{storagev1alpha1.GroupVersion.Group}, Resources: []string{"lvmclusters"}, Verbs: []string{"list"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "view-storage", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "view-storage"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "viewer", Namespace: ns}}}
	for _, o := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
