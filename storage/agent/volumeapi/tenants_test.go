package volumeapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestTenantsFromEnvironmentAndFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tenants")
	if err := os.WriteFile(file, []byte("# homelab\nmedia: media-token-0123456789\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTenants(context.Background(), "apps:apps-token-0123456789, ci:ci-token-0123456789abc", file, nil, client.ObjectKey{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["media"] != "media-token-0123456789" || got["ci"] != "ci-token-0123456789abc" {
		t.Fatalf("tenants = %v", got)
	}
	var tenants Tenants
	if err := tenants.Set(got); err != nil {
		t.Fatal(err)
	}
	if name, ok := tenants.Lookup("ci-token-0123456789abc"); !ok || name != "ci" {
		t.Fatalf("Lookup = %q, %v", name, ok)
	}
	for _, token := range []string{"", "ci-token-0123456789ab", "ci-token-0123456789abcd"} {
		if name, ok := tenants.Lookup(token); ok {
			t.Fatalf("Lookup(%q) found %s", token, name)
		}
	}
}

func TestBadTenantConfigurationIsRefused(t *testing.T) {
	var tenants Tenants
	if err := tenants.Set(map[string]string{"a": "token-a-0123456789"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config map[string]string
		says   string
	}{
		{map[string]string{"a": "short"}, "at least 16"},
		{map[string]string{"../a": "token-0123456789abc"}, "tenant name"},
		{map[string]string{"a": "same-token-0123456789", "b": "same-token-0123456789"}, "same token"},
	} {
		err := tenants.Set(tc.config)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Set(%v) = %v, want an error saying %q", tc.config, err, tc.says)
		}
	}
	if name, ok := tenants.Lookup("token-a-0123456789"); !ok || name != "a" {
		t.Fatal("a refused configuration replaced the tenants")
	}
	for _, env := range []string{"no-colon-here", "a:token-0123456789x,a:token-0123456789y"} {
		if _, err := ParseTenants(env); err == nil {
			t.Errorf("ParseTenants(%q) was accepted", env)
		} else if strings.Contains(err.Error(), "0123456789") {
			t.Errorf("ParseTenants error %q shows a token", err)
		}
	}
	if _, err := LoadTenants(context.Background(), "", "", nil, client.ObjectKey{}); err == nil || !strings.Contains(err.Error(), "AGENT_TENANTS") {
		t.Fatalf("no tenants at all: %v", err)
	}
}
