package alerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/notifications/providers"
)

// defaultTimeout bounds a notification whose Provider sets no
// spec.timeout, as Flux's default does.
const defaultTimeout = 15 * time.Second

// notify sends e to a's Provider in the background; what fails is told
// as an event on the Alert.
func (d *Dispatcher) notify(ctx context.Context, a *notificationv1beta3.Alert, e eventv1.Event) {
	var p notificationv1beta3.Provider
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.ProviderRef.Name}, &p); err != nil {
		d.warn(a, "ProviderNotFound", "Provider %s/%s not read: %v", a.Namespace, a.Spec.ProviderRef.Name, err)
		return
	}
	if p.Spec.Suspend {
		return
	}
	target, caPool, err := d.target(ctx, &p)
	if err != nil {
		d.warn(a, "ProviderInvalid", "Provider %s/%s: %v", p.Namespace, p.Name, err)
		return
	}
	e = withAlertMetadata(a, e)
	timeout := defaultTimeout
	if p.Spec.Timeout != nil {
		timeout = p.Spec.Timeout.Duration
	}
	d.sends.Add(1)
	go func() {
		defer d.sends.Done()
		sendCtx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := d.send(sendCtx, target, caPool, e); err != nil {
			d.warn(a, "NotificationFailed", "the event %s of %s %s/%s was not sent to Provider %s/%s: %s",
				e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, p.Namespace, p.Name, mask(err.Error(), target.Token))
		}
	}()
}

// withAlertMetadata adds the Alert's eventMetadata and summary to a copy
// of e's metadata; what the event already says is kept.
func withAlertMetadata(a *notificationv1beta3.Alert, e eventv1.Event) eventv1.Event {
	meta := map[string]string{}
	if a.Spec.Summary != "" {
		meta["summary"] = a.Spec.Summary
	}
	for k, v := range a.Spec.EventMetadata {
		meta[k] = v
	}
	for k, v := range e.Metadata {
		meta[k] = v
	}
	e.Metadata = meta
	return e
}

// send builds the request, checks its host against the allow-list, and
// sends it without following redirects (a redirect could leave the list).
func (d *Dispatcher) send(ctx context.Context, t providers.Target, caPool *x509.CertPool, e eventv1.Event) error {
	req, err := providers.Request(ctx, t, e)
	if errors.Is(err, providers.ErrNothingToSend) {
		return nil
	}
	if err != nil {
		return err
	}
	if !d.allowed(req.URL.Hostname()) {
		return fmt.Errorf("the host %q is not one alerts may be sent to: add it to the controller's --alert-hosts (chart value notifications.allowedHosts)", req.URL.Hostname())
	}
	c := &http.Client{
		Transport:     d.transport(caPool),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if caPool != nil {
		defer c.CloseIdleConnections() // a Provider's own transport is not kept
	}
	return providers.Send(c, req)
}

// allowed reports whether host is on the allow-list.
func (d *Dispatcher) allowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range d.Hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if h == host || (strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:])) {
			return true
		}
	}
	return false
}

// transport is the Dispatcher's transport (one for every send, so that
// connections are reused), or, for a Provider's own CA, one trusting it.
func (d *Dispatcher) transport(caPool *x509.CertPool) http.RoundTripper {
	if caPool != nil {
		return newTransport(caPool)
	}
	d.once.Do(func() {
		if d.Transport == nil {
			d.Transport = newTransport(nil)
		}
	})
	return d.Transport
}

// newTransport bounds each step of a send; with a pool, it trusts it.
func newTransport(caPool *x509.CertPool) *http.Transport {
	t := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	if caPool != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: caPool, MinVersion: tls.VersionTLS12}
	}
	return t
}

// target reads p's Secrets into where and how to send.
func (d *Dispatcher) target(ctx context.Context, p *notificationv1beta3.Provider) (providers.Target, *x509.CertPool, error) {
	if !providers.Supported(p.Spec.Type) {
		return providers.Target{}, nil, fmt.Errorf("type %q is not one strata sends to; it sends to %s", p.Spec.Type, strings.Join(providers.Types, ", "))
	}
	if p.Spec.Proxy != "" || p.Spec.ProxySecretRef != nil {
		return providers.Target{}, nil, errors.New("strata sends without a proxy; remove spec.proxy and spec.proxySecretRef")
	}
	t := providers.Target{Type: p.Spec.Type, Address: p.Spec.Address, Channel: p.Spec.Channel, Username: p.Spec.Username, ProviderUID: string(p.UID)}
	if p.Spec.SecretRef != nil {
		s, err := d.secret(ctx, p.Namespace, p.Spec.SecretRef.Name)
		if err != nil {
			return t, nil, err
		}
		if err := fromSecret(&t, s); err != nil {
			return t, nil, fmt.Errorf("the Secret %s/%s: %w", p.Namespace, s.Name, err)
		}
	}
	if t.Address == "" {
		return t, nil, errors.New("no address: set spec.address, or address in the Secret spec.secretRef names")
	}
	if p.Spec.CertSecretRef == nil {
		return t, nil, nil
	}
	s, err := d.secret(ctx, p.Namespace, p.Spec.CertSecretRef.Name)
	if err != nil {
		return t, nil, err
	}
	pem, ok := s.Data["ca.crt"]
	if !ok {
		pem = s.Data["caFile"]
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return t, nil, fmt.Errorf("the Secret %s/%s holds no PEM certificate under ca.crt (or caFile)", p.Namespace, s.Name)
	}
	return t, pool, nil
}

// fromSecret takes what a Provider's Secret may set, as Flux reads it.
func fromSecret(t *providers.Target, s *corev1.Secret) error {
	for key, into := range map[string]*string{"address": &t.Address, "token": &t.Token, "username": &t.Username} {
		if v, ok := s.Data[key]; ok {
			*into = strings.TrimSpace(string(v))
		}
	}
	if h, ok := s.Data["headers"]; ok {
		if err := yaml.Unmarshal(h, &t.Headers); err != nil {
			return fmt.Errorf("headers is not a YAML map of header names to values: %w", err)
		}
	}
	return nil
}

func (d *Dispatcher) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := d.Direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("the Secret %s/%s not read: %w", ns, name, err)
	}
	return &s, nil
}

// mask hides a token wherever an error quotes it.
func mask(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "*****")
}

// warn records a Warning event on the Alert.
func (d *Dispatcher) warn(a *notificationv1beta3.Alert, reason, format string, args ...any) {
	d.Log.Info("alert: "+fmt.Sprintf(format, args...), "alert", a.Namespace+"/"+a.Name, "reason", reason)
	if d.Events != nil {
		d.Events.Eventf(a, nil, corev1.EventTypeWarning, reason, "Notify", format, args...)
	}
}
