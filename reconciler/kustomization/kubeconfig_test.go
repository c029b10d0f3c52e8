package kustomization

import (
	"fmt"
	"strings"
	"testing"
)

// remoteKubeconfig is a kubeconfig whose cluster and user carry the given
// fields, on top of an inline CA and token that make it acceptable.
func remoteKubeconfig(cluster, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://remote.example:6443", certificate-authority-data: Zm9v%s}}]
users: [{name: u, user: {token: abc%s}}]
`, cluster, user)
}

// Each field that would make the controller run a command, read its own
// files, act as someone else or go through a proxy is refused by name;
// a server, its CA and an inline credential are taken as given.
func TestARemoteKubeconfigTakesOnlyInlineCredentials(t *testing.T) {
	refused := map[string]string{
		"exec":                     remoteKubeconfig("", ", exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}"),
		"auth-provider":            remoteKubeconfig("", ", auth-provider: {name: oidc}"),
		"tokenFile":                remoteKubeconfig("", ", tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
		"client-certificate":       remoteKubeconfig("", ", client-certificate: /etc/strata/tls.crt"),
		"client-key":               remoteKubeconfig("", ", client-key: /etc/strata/tls.key"),
		"username":                 remoteKubeconfig("", ", username: admin"),
		"password":                 remoteKubeconfig("", ", password: admin"),
		"as":                       remoteKubeconfig("", ", as: system:admin"),
		"as-groups":                remoteKubeconfig("", ", as-groups: [system:masters]"),
		"certificate-authority":    remoteKubeconfig(", certificate-authority: /etc/strata/ca.crt", ""),
		"proxy-url":                remoteKubeconfig(", proxy-url: http://tenant.example:3128", ""),
		"insecure-skip-tls-verify": remoteKubeconfig(", insecure-skip-tls-verify: true", ""),
	}
	for field, data := range refused {
		t.Run(field, func(t *testing.T) {
			_, err := remoteConfig([]byte(data), false)
			if err == nil || !strings.Contains(err.Error(), "field "+field+" is refused") {
				t.Fatalf("want field %s refused, have %v", field, err)
			}
		})
	}
	for _, server := range []string{"http://remote.example", "https://user:pw@remote.example", "remote.example"} {
		data := strings.Replace(remoteKubeconfig("", ""), "https://remote.example:6443", server, 1)
		if _, err := remoteConfig([]byte(data), false); err == nil || !strings.Contains(err.Error(), "field server") {
			t.Errorf("server %s: want refused, have %v", server, err)
		}
	}
	if _, err := remoteConfig([]byte(strings.Replace(remoteKubeconfig("", ""), "token: abc", "token: ''", 1)), false); err == nil || !strings.Contains(err.Error(), "no credential") {
		t.Errorf("a user without credentials: want refused, have %v", err)
	}

	cfg, err := remoteConfig([]byte(remoteKubeconfig("", "")), false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://remote.example:6443" || cfg.BearerToken != "abc" || string(cfg.CAData) != "foo" {
		t.Fatalf("the inline server, token and CA were not taken: %+v", cfg)
	}
	cfg, err = remoteConfig([]byte(remoteKubeconfig(", insecure-skip-tls-verify: true", "")), true)
	if err != nil || !cfg.Insecure {
		t.Fatalf("--insecure-kubeconfig-tls: want insecure taken, have %v, %v", cfg, err)
	}
}
