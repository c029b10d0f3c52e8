package lvmagents

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tokenLifetime is how long a minted token holds; it is used until
// renewBefore of its end.
const (
	tokenLifetime = 10 * time.Minute
	renewBefore   = 3 * time.Minute
)

// tokenCache keeps one token of the controller's service account per
// audience (per node), requested from the API server (TokenRequest) and
// used until shortly before it ends.
type tokenCache struct {
	mu     sync.Mutex
	tokens map[string]minted
}

type minted struct {
	token string
	until time.Time
}

func (c *tokenCache) get(ctx context.Context, minter client.Client, sa client.ObjectKey, audience string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.tokens[audience]; ok && time.Now().Before(m.until) {
		return m.token, nil
	}
	seconds := int64(tokenLifetime / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &seconds}}
	account := &corev1.ServiceAccount{}
	account.Namespace, account.Name = sa.Namespace, sa.Name
	if err := minter.SubResource("token").Create(ctx, account, req); err != nil {
		return "", fmt.Errorf("requesting the controller's token for %s (service account %s): %w", audience, sa, err)
	}
	if c.tokens == nil {
		c.tokens = map[string]minted{}
	}
	for a, m := range c.tokens {
		if time.Now().After(m.until) {
			delete(c.tokens, a)
		}
	}
	c.tokens[audience] = minted{token: req.Status.Token, until: req.Status.ExpirationTimestamp.Add(-renewBefore)}
	return req.Status.Token, nil
}
