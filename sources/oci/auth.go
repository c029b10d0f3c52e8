package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/strata-gitops/strata/sources/outcome"
)

// registry reaches the repository with the credentials of spec.secretRef,
// a kubernetes.io/dockerconfigjson Secret as Flux reads it. Only the entry
// for the repository's own registry is used: one credential opens one
// registry, whatever else the Secret holds.
func (r *Reconciler) registry(ctx context.Context, obj *sourcev1.OCIRepository, repo name.Repository) (*registry, error) {
	opts := []remote.Option{remote.WithUserAgent("strata")}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	if obj.Spec.SecretRef == nil {
		return &registry{repo: repo, opts: opts, base: r.Transport}, nil
	}
	key := obj.Namespace + "/" + obj.Spec.SecretRef.Name
	secret, err := outcome.Secret(ctx, r, obj.Namespace, obj.Spec.SecretRef.Name, "spec.secretRef", "the registry's credentials (kubectl create secret docker-registry)")
	if err != nil {
		return nil, err
	}
	auth, err := authFor(secret, repo.RegistryStr())
	if err != nil {
		return nil, fmt.Errorf("secret '%s' named in spec.secretRef: %w", key, err)
	}
	return &registry{repo: repo, opts: append(opts, remote.WithAuth(auth)), base: r.Transport}, nil
}

// dockerConfig is the part of a .dockerconfigjson that holds credentials.
type dockerConfig struct {
	Auths map[string]struct {
		Auth     string `json:"auth"`
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"auths"`
}

// authFor finds the credentials for host in a dockerconfigjson Secret.
func authFor(secret *corev1.Secret, host string) (authn.Authenticator, error) {
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, fmt.Errorf("it has no %s key: make it with kubectl create secret docker-registry", corev1.DockerConfigJsonKey)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("its %s is not JSON: %v", corev1.DockerConfigJsonKey, err)
	}
	for server, entry := range cfg.Auths {
		if registryHost(server) != host {
			continue
		}
		user, pass := entry.Username, entry.Password
		if entry.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(entry.Auth)
			if err != nil {
				return nil, fmt.Errorf("its entry for %s has an auth that is not base64", server)
			}
			var found bool
			if user, pass, found = strings.Cut(string(raw), ":"); !found {
				return nil, fmt.Errorf("its entry for %s has an auth that is not user:password", server)
			}
		}
		return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), nil
	}
	return nil, fmt.Errorf("it holds no credentials for the registry %s", host)
}

// registryHost is a dockerconfig server key as a registry host: keys may
// carry a scheme and a path (https://index.docker.io/v1/).
func registryHost(server string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	s, _, _ = strings.Cut(s, "/")
	return s
}
