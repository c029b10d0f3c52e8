package btrfsbackend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// agent returns a client of the StorageClass's agent with the tenant
// token from the call's secrets or, failing those, from the Secret the
// class's provisioner-secret parameters name.
func (b *Controller) agent(ctx context.Context, sc *storagev1.StorageClass, secrets map[string]string) (*volumeapi.Client, error) {
	u := sc.Parameters[rules.AgentURLParameter]
	if parsed, err := url.Parse(u); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s: %s %q is not an http(s) URL", sc.Name, rules.AgentURLParameter, u)
	}
	token := secrets[rules.TokenKey]
	if token == "" {
		var err error
		if token, err = b.classToken(ctx, sc); err != nil {
			return nil, err
		}
	}
	httpClient, err := b.httpFor(ctx, sc, u)
	if err != nil {
		return nil, err
	}
	return &volumeapi.Client{URL: u, Token: token, HTTP: httpClient}, nil
}

// httpFor is the HTTP client for the class's agent: one that trusts only
// the class's CA when it names one, the system's roots otherwise. Clients
// are kept by CA, so connections are reused across calls.
func (b *Controller) httpFor(ctx context.Context, sc *storagev1.StorageClass, agentURL string) (*http.Client, error) {
	ref := sc.Parameters[rules.AgentCASecretParameter]
	if ref == "" {
		return b.http, nil
	}
	if !strings.HasPrefix(agentURL, "https://") {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s names %s but its %s %s is not https://", sc.Name, rules.AgentCASecretParameter, rules.AgentURLParameter, agentURL)
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s: %s %q: write namespace/name", sc.Name, rules.AgentCASecretParameter, ref)
	}
	secret := &corev1.Secret{}
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "StorageClass %s: reading its CA Secret %s: %v", sc.Name, ref, err)
	}
	caPEM := secret.Data["ca.crt"]
	if cached, ok := b.clients.Load(string(caPEM)); ok {
		return cached.(*http.Client), nil
	}
	c, err := volumeapi.TrustingCA(caPEM, b.http.Timeout)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "StorageClass %s: Secret %s has no PEM certificate under ca.crt", sc.Name, ref)
	}
	actual, _ := b.clients.LoadOrStore(string(caPEM), c)
	return actual.(*http.Client), nil
}

func (b *Controller) classToken(ctx context.Context, sc *storagev1.StorageClass) (string, error) {
	name, ns := sc.Parameters[provisionerSecretName], sc.Parameters[provisionerSecretNamespace]
	if name == "" || strings.Contains(name+ns, "${") {
		return "", status.Errorf(codes.InvalidArgument, "no tenant token: the call carries no %q secret, and StorageClass %s names no fixed Secret in %s",
			rules.TokenKey, sc.Name, provisionerSecretName)
	}
	secret := &corev1.Secret{}
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "StorageClass %s: reading its token Secret %s/%s: %v", sc.Name, ns, name, err)
	}
	token := strings.TrimSpace(string(secret.Data[rules.TokenKey]))
	if token == "" {
		return "", status.Errorf(codes.FailedPrecondition, "Secret %s/%s has no %q key with the tenant token", ns, name, rules.TokenKey)
	}
	return token, nil
}

// classOf returns the StorageClass a volume ID names.
func (b *Controller) classOf(ctx context.Context, id backend.VolumeID) (*storagev1.StorageClass, error) {
	sc := &storagev1.StorageClass{}
	err := b.Cache.Get(ctx, client.ObjectKey{Name: id.StorageClass}, sc)
	if apierrors.IsNotFound(err) {
		err = b.Client.Get(ctx, client.ObjectKey{Name: id.StorageClass}, sc)
	}
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// matchClass finds the StorageClass CreateVolume was called for: the one
// of this driver with exactly these parameters (the sidecar adds only
// csi.storage.k8s.io/ ones), or the one the storage-class parameter names.
func (b *Controller) matchClass(ctx context.Context, params map[string]string) (*storagev1.StorageClass, error) {
	found, err := b.classesFor(ctx, params)
	if err != nil {
		return nil, err
	}
	if len(found) > 1 {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClasses %s and %s have the same parameters: add %s with each one's name to tell them apart",
			found[0].Name, found[1].Name, storagev1alpha1.StorageClassParameter)
	}
	return &found[0], nil
}

// classesFor are the StorageClasses the parameters can be of: the one
// they name, or every class of this driver with these parameters, at
// least one.
func (b *Controller) classesFor(ctx context.Context, params map[string]string) ([]storagev1.StorageClass, error) {
	if name := params[storagev1alpha1.StorageClassParameter]; name != "" {
		sc, err := b.classOf(ctx, backend.VolumeID{StorageClass: name})
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s (parameter %s): %v", name, storagev1alpha1.StorageClassParameter, err)
		}
		return []storagev1.StorageClass{*sc}, nil
	}
	want := userParameters(params)
	found, err := classesWith(ctx, b.Cache, want)
	if err == nil && len(found) == 0 {
		// A class created moments ago (with its claim, in one apply) may
		// not have reached the cache yet.
		found, err = classesWith(ctx, b.Client, want)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "listing StorageClasses: %v", err)
	}
	if len(found) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "no StorageClass of %s has the parameters %v; a btrfs volume needs one, which tells later calls where its agent is",
			storagev1alpha1.CSIDriver, want)
	}
	return found, nil
}

// classesWith lists this driver's StorageClasses whose user parameters
// are want.
func classesWith(ctx context.Context, r client.Reader, want map[string]string) ([]storagev1.StorageClass, error) {
	classes := &storagev1.StorageClassList{}
	if err := r.List(ctx, classes); err != nil {
		return nil, err
	}
	var found []storagev1.StorageClass
	for _, sc := range classes.Items {
		if sc.Provisioner == storagev1alpha1.CSIDriver && maps.Equal(userParameters(sc.Parameters), want) {
			found = append(found, sc)
		}
	}
	return found, nil
}

func userParameters(params map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range params {
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			out[k] = v
		}
	}
	return out
}

// agentFor resolves a volume or snapshot ID to its class's agent.
func (b *Controller) agentFor(ctx context.Context, id backend.VolumeID, secrets map[string]string) (*volumeapi.Client, *storagev1.StorageClass, error) {
	sc, err := b.classOf(ctx, id)
	if err != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "StorageClass %s: %v", id.StorageClass, err)
	}
	agent, err := b.agent(ctx, sc, secrets)
	return agent, sc, err
}

// agentError maps an agent's answer to a gRPC status.
func agentError(err error, what string) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	code := map[string]codes.Code{
		"Invalid": codes.InvalidArgument, "NotFound": codes.NotFound, "Conflict": codes.AlreadyExists,
		"InUse": codes.FailedPrecondition, "NoSpace": codes.ResourceExhausted, "Unauthorized": codes.Unauthenticated,
	}[volumeapi.ReasonOf(err)]
	if code == codes.OK {
		code = codes.Unavailable
		if volumeapi.StatusOf(err) >= 500 {
			code = codes.Internal
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	}
	return status.Errorf(code, "%s: %v", what, err)
}

// AgentOf returns a client of the agent that holds a btrfs volume, by its
// CSI volume handle, with its class's tenant token, and the volume's name
// on that agent. Replication and failover reach the agents this way.
func (b *Controller) AgentOf(ctx context.Context, volumeHandle string) (mover.Agent, string, error) {
	id, isBtrfs, err := b.Route(ctx, volumeHandle, nil)
	if err != nil {
		return nil, "", err
	}
	if !isBtrfs {
		return nil, "", fmt.Errorf("volume %s is not on a btrfs StorageClass (one with %s)", volumeHandle, rules.AgentURLParameter)
	}
	agent, _, err := b.agentFor(ctx, id, nil)
	if err != nil {
		return nil, "", err
	}
	return agent, id.Name, nil
}
