package kustomization

import (
	"fmt"
	"net/url"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// remoteConfig turns a tenant's kubeconfig into a client configuration
// holding only what the tenant itself gave: a server, its CA, and a bearer
// token or client certificate, all inline. Anything that would make the
// controller run a command (exec, auth-provider), read one of its own files
// (tokenFile, client-certificate, certificate-authority, ...), act as
// someone else, or talk through a proxy is refused by name: the controller
// is a cluster administrator, and a kubeconfig is a tenant's input.
// insecureTLS lets insecure-skip-tls-verify through
// (--insecure-kubeconfig-tls).
func remoteConfig(data []byte, insecureTLS bool) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	name := raw.CurrentContext
	kctx, ok := raw.Contexts[name]
	if name == "" || !ok {
		return nil, fmt.Errorf("current-context %q names no context: set current-context to one of its contexts", name)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("context %q names cluster %q, which it does not hold", name, kctx.Cluster)
	}
	user, ok := raw.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("context %q names user %q, which it does not hold", name, kctx.AuthInfo)
	}
	if err := checkCluster(kctx.Cluster, cluster, insecureTLS); err != nil {
		return nil, err
	}
	if err := checkUser(kctx.AuthInfo, user); err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:        cluster.Server,
		BearerToken: user.Token,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cluster.InsecureSkipTLSVerify,
			ServerName: cluster.TLSServerName,
			CAData:     cluster.CertificateAuthorityData,
			CertData:   user.ClientCertificateData,
			KeyData:    user.ClientKeyData,
		},
	}, nil
}

// refused is a kubeconfig field the controller does not take from a
// tenant, and why.
type refused struct {
	field string
	set   bool
	why   string
}

// firstRefused is the first of fields that is set, as an error naming it.
func firstRefused(where string, fields []refused) error {
	for _, f := range fields {
		if f.set {
			return fmt.Errorf("%s: field %s is refused: %s", where, f.field, f.why)
		}
	}
	return nil
}

const (
	fileWhy  = "it names a file on the controller; give the contents inline (the *-data fields)"
	proxyWhy = "the controller talks to a remote API server directly"
)

func checkCluster(name string, c *clientcmdapi.Cluster, insecureTLS bool) error {
	where := fmt.Sprintf("cluster %q", name)
	err := firstRefused(where, []refused{
		{"certificate-authority", c.CertificateAuthority != "", fileWhy},
		{"proxy-url", c.ProxyURL != "", proxyWhy},
		{"insecure-skip-tls-verify", c.InsecureSkipTLSVerify && !insecureTLS,
			"the server's certificate must be checked; give certificate-authority-data (or start the controller with --insecure-kubeconfig-tls)"},
	})
	if err != nil {
		return err
	}
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fmt.Errorf("%s: field server %q must be an https:// URL with a host and no credentials", where, c.Server)
	}
	return nil
}

func checkUser(name string, u *clientcmdapi.AuthInfo) error {
	err := firstRefused(fmt.Sprintf("user %q", name), []refused{
		{"exec", u.Exec != nil, "a credential plugin would run as a command inside the controller; give a token or a client certificate inline"},
		{"auth-provider", u.AuthProvider != nil, "an auth provider runs the controller's own credential code; give a token or a client certificate inline"},
		{"tokenFile", u.TokenFile != "", fileWhy},
		{"client-certificate", u.ClientCertificate != "", fileWhy},
		{"client-key", u.ClientKey != "", fileWhy},
		{"username", u.Username != "", "basic authentication is not taken; give a token or a client certificate"},
		{"password", u.Password != "", "basic authentication is not taken; give a token or a client certificate"},
		{"as", u.Impersonate != "", "the controller impersonates spec.serviceAccountName itself"},
		{"as-uid", u.ImpersonateUID != "", "the controller impersonates spec.serviceAccountName itself"},
		{"as-groups", len(u.ImpersonateGroups) > 0, "the controller impersonates spec.serviceAccountName itself"},
		{"as-user-extra", len(u.ImpersonateUserExtra) > 0, "the controller impersonates spec.serviceAccountName itself"},
	})
	if err != nil {
		return err
	}
	if u.Token == "" && len(u.ClientCertificateData) == 0 {
		return fmt.Errorf("user %q: no credential: give token, or client-certificate-data and client-key-data", name)
	}
	return nil
}
