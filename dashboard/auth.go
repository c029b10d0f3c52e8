package dashboard

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// User is who asks.
type User struct {
	Name   string
	Groups []string
}

// Authorizer decides who the caller is and what they may see.
type Authorizer interface {
	// Authenticate names the caller, or says why not.
	Authenticate(r *http.Request) (User, error)
	// CanList reports whether u may list resource (of group) in
	// namespace ("" for cluster-scoped resources).
	CanList(ctx context.Context, u User, group, resource, namespace string) bool
}

// Open is --dashboard-auth=none: whoever reaches the port sees
// everything, for a dashboard reached only through kubectl port-forward,
// whose own RBAC check (pods/portforward) is the gate.
type Open struct{}

func (Open) Authenticate(*http.Request) (User, error)                   { return User{Name: "port-forward"}, nil }
func (Open) CanList(context.Context, User, string, string, string) bool { return true }

// Kubernetes is --dashboard-auth=kubernetes: the caller's bearer token
// (as an authenticating proxy sets it) is checked with a TokenReview,
// and each view asks a SubjectAccessReview whether that user may list
// what it shows. Answers are kept for a short while, so a page view
// costs no review once warm.
type Kubernetes struct {
	Client client.Client
	// TTL is how long answers are kept; 0 takes 30 s.
	TTL time.Duration

	mu      sync.Mutex
	answers map[string]answer
}

type answer struct {
	user    User
	allowed bool
	err     error
	at      time.Time
	// unreachable marks an answer the API server did not give (it could
	// not be asked): never kept, so the next request asks again.
	unreachable bool
}

// errReviewFailed is a token the API server could not be asked about:
// the caller is told to come back, not that its token is bad.
var errReviewFailed = errors.New("the API server could not review the token; try again")

// errNoToken is a request without a bearer token.
var errNoToken = errors.New("no bearer token: send Authorization: Bearer <token> (an authenticating proxy in front of the dashboard does), or reach it through kubectl port-forward with --dashboard-auth=none")

func (k *Kubernetes) ttl() time.Duration {
	if k.TTL == 0 {
		return 30 * time.Second
	}
	return k.TTL
}

// remembered returns a kept answer, or computes and keeps one.
func (k *Kubernetes) remembered(key string, compute func() answer) answer {
	k.mu.Lock()
	if a, ok := k.answers[key]; ok && time.Since(a.at) < k.ttl() {
		k.mu.Unlock()
		return a
	}
	k.mu.Unlock()
	a := compute()
	if a.unreachable {
		return a
	}
	a.at = time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.answers == nil || len(k.answers) > 10000 {
		k.answers = map[string]answer{}
	}
	k.answers[key] = a
	return a
}

// Authenticate reviews the request's bearer token.
func (k *Kubernetes) Authenticate(r *http.Request) (User, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return User{}, errNoToken
	}
	sum := sha256.Sum256([]byte(token))
	a := k.remembered("token/"+string(sum[:]), func() answer {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		if err := k.Client.Create(r.Context(), review); err != nil {
			return answer{err: fmt.Errorf("%w: %w", errReviewFailed, err), unreachable: true}
		}
		if !review.Status.Authenticated {
			return answer{err: errors.New("the token is not valid: " + review.Status.Error)}
		}
		return answer{user: User{Name: review.Status.User.Username, Groups: review.Status.User.Groups}}
	})
	return a.user, a.err
}

// CanList asks the API server whether u may list resource in namespace.
func (k *Kubernetes) CanList(ctx context.Context, u User, group, resource, namespace string) bool {
	key := strings.Join([]string{"sar", u.Name, strings.Join(u.Groups, ","), group, resource, namespace}, "/")
	return k.remembered(key, func() answer {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, Groups: u.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Group: group, Resource: resource, Namespace: namespace},
		}}
		if err := k.Client.Create(ctx, review); err != nil {
			return answer{unreachable: true}
		}
		return answer{allowed: review.Status.Allowed}
	}).allowed
}

// listable answers, for one page view, whether u may list resource (of
// group) in a namespace, asking the Authorizer once per namespace.
func (s *Server) listable(ctx context.Context, u User, group, resource string) func(namespace string) bool {
	seen := map[string]bool{}
	return func(ns string) bool {
		ok, asked := seen[ns]
		if !asked {
			ok = s.Auth.CanList(ctx, u, group, resource, ns)
			seen[ns] = ok
		}
		return ok
	}
}

// userKey carries the caller through a request's context.
type userKey struct{}

// authenticated serves next only to a caller the Authorizer names.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.Auth.Authenticate(r)
		if errors.Is(err, errReviewFailed) {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

func userOf(ctx context.Context) User {
	u, _ := ctx.Value(userKey{}).(User)
	return u
}
