package volumeapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// A node agent's pair routes take only strata's controller, by its own
// service account token for that agent's node's audience, reviewed by a
// real API server: not another account's token, not the controller's
// token for another node (which that node's agent received and could
// replay) or another audience, and not a tenant token every node holds.
func TestANodeAgentsPairRoutesTakeOnlyTheController(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := fmt.Sprintf("callers-%d", os.Getpid())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	token := func(account string, audiences ...string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}}
		if err := env.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}
		if err := env.Client.SubResource("token").Create(ctx, sa, req); err != nil {
			t.Fatal(err)
		}
		return req.Status.Token
	}
	_, store := agentAndStore(t)
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{tenantA: tokenA}); err != nil {
		t.Fatal(err)
	}
	server := volumeapi.New(store, tenants)
	server.Controller = &volumeapi.ControllerCaller{Client: env.Client, Identity: "system:serviceaccount:" + ns + ":controller", Tenant: tenantA,
		Node: "node-a"}
	srv := httptest.NewServer(server.Handler())
	defer srv.Close()
	status := func(path, bearer string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"the controller, for this node's agent", token("controller", volumeapi.AudienceFor("node-a")), http.StatusNotFound},
		{"the controller, for another node's agent", token("controller", volumeapi.AudienceFor("node-b")), http.StatusUnauthorized},
		{"the controller, for every agent", token("controller", volumeapi.Audience), http.StatusUnauthorized},
		{"the controller, for the API server", token("controller"), http.StatusUnauthorized},
		{"another account, for this node's agent", token("a-node-agent", volumeapi.AudienceFor("node-a")), http.StatusUnauthorized},
		{"the tenant token every node holds", tokenA, http.StatusUnauthorized},
	} {
		if got := status("/v1/pairs/none", c.token); got != c.want {
			t.Errorf("GET /v1/pairs/none as %s = %d, want %d", c.who, got, c.want)
		}
	}
	if got := status("/v1/volumes", tokenA); got != http.StatusOK {
		t.Errorf("the tenant's own volume routes = %d, want 200", got)
	}
}
