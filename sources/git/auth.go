package git

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	corev1 "k8s.io/api/core/v1"
)

// authFromSecret builds go-git credentials from a Secret with Flux's keys:
// username/password (basic), bearerToken, or identity + known_hosts (SSH).
// knownHostsDir is where the known_hosts data is written for go-git to read.
// Credentials for a plain http:// URL are refused unless allowHTTP: they
// would cross the network in clear.
func authFromSecret(repoURL string, secret *corev1.Secret, knownHostsDir string, allowHTTP bool) (transport.AuthMethod, error) {
	u, err := url.Parse(repoURL)
	if err != nil {
		return nil, fmt.Errorf("url %q is invalid: %w", Redact(repoURL), err)
	}
	if u.Scheme == "http" && !allowHTTP && (u.User != nil || secret != nil && hasHTTPCredentials(secret)) {
		return nil, fmt.Errorf("url %s is plain http:// and carries credentials, which would cross the network in clear: "+
			"use https://, or start the controller with --insecure-allow-http-auth", Redact(repoURL))
	}
	if secret == nil {
		return nil, nil
	}
	data := secret.Data
	switch u.Scheme {
	case "http", "https":
		if token, ok := data["bearerToken"]; ok {
			return &githttp.TokenAuth{Token: string(token)}, nil
		}
		if user, ok := data["username"]; ok {
			return &githttp.BasicAuth{Username: string(user), Password: string(data["password"])}, nil
		}
		return nil, nil
	case "ssh":
		return sshAuth(u, secret, knownHostsDir)
	default:
		return nil, fmt.Errorf("url scheme %q is not supported: use http, https or ssh", u.Scheme)
	}
}

func sshAuth(u *url.URL, secret *corev1.Secret, knownHostsDir string) (transport.AuthMethod, error) {
	identity, ok := secret.Data["identity"]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no 'identity' key, which ssh URLs need", secret.Namespace, secret.Name)
	}
	user := u.User.Username()
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeys(user, identity, string(secret.Data["password"]))
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: identity is not a usable private key: %w", secret.Namespace, secret.Name, err)
	}
	knownHosts, ok := secret.Data["known_hosts"]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no 'known_hosts' key: strata never trusts an unknown SSH host key", secret.Namespace, secret.Name)
	}
	if err := os.MkdirAll(knownHostsDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(knownHostsDir, "known_hosts")
	if err := os.WriteFile(path, knownHosts, 0o600); err != nil {
		return nil, err
	}
	callback, err := gitssh.NewKnownHostsCallback(path)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: known_hosts is invalid: %w", secret.Namespace, secret.Name, err)
	}
	keys.HostKeyCallback = callback
	return keys, nil
}

func hasHTTPCredentials(secret *corev1.Secret) bool {
	_, token := secret.Data["bearerToken"]
	_, user := secret.Data["username"]
	return token || user
}

// Redact hides the user information of a URL (a token is often given as
// the user name), for errors, status and events.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		if i, j := strings.Index(rawURL, "://"), strings.LastIndex(rawURL, "@"); i >= 0 && j > i {
			return rawURL[:i+3] + "***" + rawURL[j:] // unparsable, but plainly with credentials
		}
		return rawURL
	}
	u.User = nil
	scheme, rest, _ := strings.Cut(u.String(), "://")
	return scheme + "://***@" + rest
}

// redactIn hides rawURL's credentials wherever they appear in msg: in the
// URL itself, and on their own, as tools print them.
func redactIn(msg, rawURL string) string {
	msg = strings.ReplaceAll(msg, rawURL, Redact(rawURL))
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return msg
	}
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "***")
	}
	if name := u.User.Username(); len(name) >= 8 { // long enough to be a token, not a word of the message
		msg = strings.ReplaceAll(msg, name, "***")
	}
	return msg
}
