// Package guardtest serves the data-loss guard for Flux's prunes
// (reconciler/guardwebhook) to an API server, for its tests and its
// benchmark: over TLS on loopback, registered with the chart's rules, and
// acting as Flux's kustomize-controller.
package guardtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/agenttls"
	"github.com/strata-gitops/strata/reconciler/guardwebhook"
)

// Webhook is the guard served, and its configuration, registered or not.
type Webhook struct {
	admin  client.Client
	flux   client.Client
	served agenttls.Served
	config *admissionregistrationv1.ValidatingWebhookConfiguration
	// probe is a claim in namespace whose dry-run delete by Flux shows
	// whether the API server calls the webhook.
	probe *corev1.PersistentVolumeClaim
}

// Serve serves the guard, reading through admin, and returns it with a
// client acting as Flux's kustomize-controller (cfg impersonating it);
// name names its configuration, namespace holds its probe. configure, if
// given, sets the handler's options.
func Serve(admin client.Client, cfg *rest.Config, name, namespace string, configure ...func(*guardwebhook.Handler)) (*Webhook, error) {
	handler := &guardwebhook.Handler{Reader: admin}
	for _, c := range configure {
		c(handler)
	}
	mux := http.NewServeMux()
	mux.Handle(guardwebhook.Path, &admission.Webhook{Handler: handler})
	served, err := agenttls.Serve(mux)
	if err != nil {
		return nil, err
	}
	flux, err := As(cfg, guardwebhook.DefaultUsers[0], "system:serviceaccounts", "system:serviceaccounts:flux-system")
	if err != nil {
		served.Srv.Close()
		return nil, err
	}
	url := served.Srv.URL + guardwebhook.Path
	return &Webhook{admin: admin, flux: flux, served: served, probe: Claim(namespace, "guard-probe", nil),
		config: guardwebhook.Configuration(name, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: served.CAPEM},
			guardwebhook.DefaultUsers, guardwebhook.DefaultGarbageCollectors)}, nil
}

// Flux is a client acting as Flux's kustomize-controller.
func (w *Webhook) Flux() client.Client { return w.flux }

// As is a client acting as user, in groups, through cfg (an
// administrator's, impersonating).
func As(cfg *rest.Config, user string, groups ...string) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return client.New(c, client.Options{Scheme: scheme.New()})
}

// Close stops serving.
func (w *Webhook) Close() { w.served.Srv.Close() }

// Register registers the webhook (on) or removes it, and waits until the
// API server acts on it: Flux's dry-run delete of the unannotated probe
// claim is refused exactly while it is registered.
func (w *Webhook) Register(ctx context.Context, on bool) error {
	var err error
	if on {
		err = client.IgnoreAlreadyExists(w.admin.Create(ctx, w.config.DeepCopy()))
	} else {
		err = client.IgnoreNotFound(w.admin.Delete(ctx, w.config.DeepCopy()))
	}
	if err == nil {
		err = client.IgnoreAlreadyExists(w.admin.Create(ctx, w.probe.DeepCopy()))
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		err := w.flux.Delete(ctx, w.probe.DeepCopy(), client.DryRunAll)
		if refused := err != nil && strings.Contains(err.Error(), "blocked"); refused == on {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the API server did not act on the webhook's registration (registered: %v) within a minute", on)
}

// Claim is a claim of 1 GiB with the annotations given.
func Claim(ns, name string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}
