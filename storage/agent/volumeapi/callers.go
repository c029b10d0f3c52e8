package volumeapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Audience begins the audience of the tokens strata's controller calls
// the node agents' pair API with: each node's agent takes only tokens for
// its own node's audience (AudienceFor), so that an agent that received
// the controller's token cannot replay it to another node. A token for
// another audience, the API server's own included, is refused.
const Audience = "strata-agent"

// AudienceFor is the audience of the controller's tokens for node's
// agent.
func AudienceFor(node string) string { return Audience + ":" + node }

// ControllerCaller authenticates the caller of a node agent's pair
// routes as strata's controller, by its own service account token,
// reviewed by the API server (TokenReview), instead of a token every
// node shares. A node agent then holds nothing that opens another
// node's pairs: one compromised node cannot sync another node's volumes
// to itself, nor promote over them.
type ControllerCaller struct {
	// Client creates TokenReviews.
	Client client.Client
	// Identity is the controller's user name,
	// system:serviceaccount:<namespace>:<name>.
	Identity string
	// Tenant is the tenant the controller's calls act as: the pairs'
	// directory on the node.
	Tenant string
	// Node is the agent's node: the audience its tokens are for
	// (AudienceFor).
	Node string

	mu       sync.Mutex
	reviewed map[[32]byte]time.Time // token digest → until when it holds
}

// reviewFor is how long a reviewed token is taken without asking again:
// short, so that a token revoked with its pod stops working soon.
const reviewFor = time.Minute

// Authenticate returns the tenant of a token of the controller's, or
// false.
func (c *ControllerCaller) Authenticate(ctx context.Context, token string) (string, bool, error) {
	if token == "" {
		return "", false, nil
	}
	digest := sha256.Sum256([]byte(token))
	c.mu.Lock()
	until, ok := c.reviewed[digest]
	c.mu.Unlock()
	if ok && time.Now().Before(until) {
		return c.Tenant, true, nil
	}
	audience := AudienceFor(c.Node)
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := c.Client.Create(ctx, review); err != nil {
		return "", false, fmt.Errorf("reviewing a caller's token with the API server: %w", err)
	}
	st := review.Status
	if !st.Authenticated || st.User.Username != c.Identity || !slices.Contains(st.Audiences, audience) {
		return "", false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reviewed == nil {
		c.reviewed = map[[32]byte]time.Time{}
	}
	for d, u := range c.reviewed {
		if time.Now().After(u) {
			delete(c.reviewed, d)
		}
	}
	c.reviewed[digest] = time.Now().Add(reviewFor)
	return c.Tenant, true, nil
}
