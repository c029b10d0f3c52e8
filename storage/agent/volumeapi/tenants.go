package volumeapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/storage/agent/contract"
)

// Tenants maps bearer tokens to tenants. It may be replaced while the
// server runs (a changed Secret), so reads take a lock.
type Tenants struct {
	mu     sync.RWMutex
	tokens []tenantToken
}

type tenantToken struct {
	tenant string
	token  []byte
}

// minTokenLength keeps guessable tokens out.
const minTokenLength = 16

// Set replaces the tokens; tenant names and tokens are checked first
// and nothing changes when one is bad.
func (t *Tenants) Set(byTenant map[string]string) error {
	var tokens []tenantToken
	seen := map[string]string{}
	names := make([]string, 0, len(byTenant))
	for name := range byTenant {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		token := byTenant[name]
		if err := contract.CheckName("tenant", name); err != nil {
			return err
		}
		if len(token) < minTokenLength {
			return fmt.Errorf("tenant %s: its token is %d characters; use at least %d (such as `openssl rand -hex 32`)", name, len(token), minTokenLength)
		}
		if other, ok := seen[token]; ok {
			return fmt.Errorf("tenants %s and %s have the same token; each tenant needs its own", other, name)
		}
		seen[token] = name
		tokens = append(tokens, tenantToken{tenant: name, token: []byte(token)})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = tokens
	return nil
}

// Lookup returns the tenant of a token. Every token is compared, in
// constant time, so the time taken says nothing about any of them.
func (t *Tenants) Lookup(token string) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	found := ""
	for _, tt := range t.tokens {
		if subtle.ConstantTimeCompare(tt.token, []byte(token)) == 1 {
			found = tt.tenant
		}
	}
	return found, found != ""
}

// Networks are the networks each tenant's NFS clients must be in, set by
// the admin. A tenant with none listed may export to single addresses
// only (a node's IP, as the CSI driver asks), never to a range, so that
// no tenant can open its volumes to 0.0.0.0/0 on its own.
type Networks map[string][]netip.Prefix

// ParseNetworks reads "tenant:CIDR" pairs separated by commas or new
// lines, a tenant once per network, the format of --tenant-networks.
func ParseNetworks(s string) (Networks, error) {
	out := Networks{}
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, cidr, ok := strings.Cut(line, ":")
		name, cidr = strings.TrimSpace(name), strings.TrimSpace(cidr)
		if !ok {
			return nil, fmt.Errorf("tenant network %q is not tenant:CIDR", line)
		}
		if err := contract.CheckName("tenant", name); err != nil {
			return nil, fmt.Errorf("tenant network %q: %w", line, err)
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("tenant network %q: %q is not a CIDR such as 10.0.0.0/24", line, cidr)
		}
		out[name] = append(out[name], p.Masked())
	}
	return out, nil
}

// Allow refuses an NFS client the tenant may not export to, saying what
// the admin has allowed.
func (n Networks) Allow(tenant, client string) error {
	prefix, err := clientPrefix(client)
	if err != nil {
		return &contract.Error{Kind: contract.Invalid, Message: err.Error()}
	}
	allowed := n[tenant]
	if len(allowed) == 0 {
		if prefix.IsSingleIP() {
			return nil
		}
		return &contract.Error{Kind: contract.Forbidden, Message: fmt.Sprintf(
			"tenant %s may export to single addresses only, not the range %s: the agent's admin lists the networks a tenant may export to with --tenant-networks", tenant, client)}
	}
	for _, net := range allowed {
		if net.Bits() <= prefix.Bits() && net.Contains(prefix.Addr()) {
			return nil
		}
	}
	return &contract.Error{Kind: contract.Forbidden, Message: fmt.Sprintf(
		"tenant %s may not export to %s: it is outside the tenant's networks %v (--tenant-networks)", tenant, client, allowed)}
}

// clientPrefix reads an NFS client, an address or a CIDR, as a prefix.
func clientPrefix(client string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(client); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(client)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("NFS client %q is neither an IP address nor a CIDR", client)
	}
	return p.Masked(), nil
}

// ParseTenants reads "tenant:token" pairs separated by commas or new
// lines, the format of AGENT_TENANTS and of a tenants file. Blank lines
// and lines starting with # are skipped.
func ParseTenants(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, token, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("tenant entry %q is not tenant:token", redact(line))
		}
		name = strings.TrimSpace(name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("tenant %s is listed twice", name)
		}
		out[name] = strings.TrimSpace(token)
	}
	return out, nil
}

// redact keeps a token out of an error message.
func redact(entry string) string {
	if len(entry) > 4 {
		return entry[:4] + "…"
	}
	return entry
}

// LoadTenants reads the tenants from the environment (AGENT_TENANTS), a
// file, and a Secret whose keys are tenant names and values their
// tokens, in that order; a tenant named twice is an error.
func LoadTenants(ctx context.Context, env, file string, c client.Reader, secret client.ObjectKey) (map[string]string, error) {
	all := map[string]string{}
	add := func(from string, m map[string]string) error {
		for name, token := range m {
			if _, dup := all[name]; dup {
				return fmt.Errorf("tenant %s is configured twice (again in %s)", name, from)
			}
			all[name] = token
		}
		return nil
	}
	m, err := ParseTenants(env)
	if err != nil {
		return nil, fmt.Errorf("AGENT_TENANTS: %w", err)
	}
	if err := add("AGENT_TENANTS", m); err != nil {
		return nil, err
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("tenants file: %w", err)
		}
		if m, err = ParseTenants(string(data)); err != nil {
			return nil, fmt.Errorf("tenants file %s: %w", file, err)
		}
		if err := add(file, m); err != nil {
			return nil, err
		}
	}
	if secret.Name != "" {
		s := &corev1.Secret{}
		if err := c.Get(ctx, secret, s); err != nil {
			return nil, fmt.Errorf("tenants Secret %s: %w", secret, err)
		}
		m = map[string]string{}
		for name, token := range s.Data {
			m[name] = strings.TrimSpace(string(token))
		}
		if err := add("Secret "+secret.String(), m); err != nil {
			return nil, err
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no tenants configured: set AGENT_TENANTS (tenant:token,...), --tenants-file or --tenants-secret")
	}
	return all, nil
}

// SecretKey reads a flag's namespace/name; empty is the zero key.
func SecretKey(flag, s string) (client.ObjectKey, error) {
	if s == "" {
		return client.ObjectKey{}, nil
	}
	for i := range s {
		if s[i] == '/' && i > 0 && i < len(s)-1 {
			return client.ObjectKey{Namespace: s[:i], Name: s[i+1:]}, nil
		}
	}
	return client.ObjectKey{}, fmt.Errorf("--%s %q: write namespace/name", flag, s)
}
