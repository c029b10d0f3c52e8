// Command guardbench measures what the data-loss guard for Flux's prunes
// (engine/guardwebhook) adds to a prune: Flux's kustomize-controller's
// deletes of 1000 ConfigMaps, with and without the webhook registered,
// in alternating rounds on one API server; and, where it does apply, its
// cost on deletes of opted-in claims. Deletes are made as Flux's service
// account, one after the other, as Flux's prune makes them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/strata-gitops/strata/engine/guard"
	"github.com/strata-gitops/strata/engine/guardwebhook"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/agenttls"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func main() {
	configMaps := flag.Int("configmaps", 1000, "ConfigMaps pruned per round")
	claims := flag.Int("claims", 100, "opted-in claims deleted per round, where the webhook is called")
	rounds := flag.Int("rounds", 6, "rounds of each, alternating, each round swapping which goes first")
	flag.Parse()
	if err := run(*configMaps, *claims, *rounds); err != nil {
		log.Fatal(err)
	}
}

// timing is one round's deletes: the whole and each.
type timing struct {
	total time.Duration
	each  []time.Duration
}

func (t timing) p(q float64) time.Duration {
	s := slices.Clone(t.each)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func run(configMaps, claims, rounds int) error {
	env, err := testenv.StartAPIServer(nil)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	probeConfig = env.Config
	flux, err := client.New(testenv.ServiceAccountConfig(env.Config, "flux-system", "kustomize-controller"), client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	if err := grantFlux(ctx, env.Client); err != nil {
		return err
	}
	hook, err := newWebhook(env.Client)
	if err != nil {
		return err
	}
	defer hook.close()
	results := map[string][]timing{}
	for r := range rounds {
		// Each round swaps which goes first, so that neither gains from
		// its place (a warmer API server, a fuller etcd).
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, on := range order {
			if err := hook.set(ctx, on); err != nil {
				return err
			}
			label := map[bool]string{false: "without", true: "with"}[on]
			cm, err := prune(ctx, env.Client, flux, fmt.Sprintf("cm-%s-%d", label, r), configMaps, configMap)
			if err != nil {
				return err
			}
			results["ConfigMaps "+label] = append(results["ConfigMaps "+label], cm)
			pvc, err := prune(ctx, env.Client, flux, fmt.Sprintf("pvc-%s-%d", label, r), claims, optedInClaim)
			if err != nil {
				return err
			}
			results["claims "+label] = append(results["claims "+label], pvc)
		}
	}
	fmt.Printf("| deletes as Flux's kustomize-controller | webhook | median total | p50 each | p99 each |\n|---|---|---|---|---|\n")
	for _, what := range []string{"ConfigMaps", "claims"} {
		n := map[string]int{"ConfigMaps": configMaps, "claims": claims}[what]
		for _, label := range []string{"without", "with"} {
			ts := results[what+" "+label]
			slices.SortFunc(ts, func(a, b timing) int { return int(a.total - b.total) })
			m := ts[len(ts)/2]
			var all []string
			for _, x := range ts {
				all = append(all, x.total.Round(time.Millisecond).String())
			}
			fmt.Fprintf(os.Stderr, "%s %s, each round's total: %s\n", what, label, strings.Join(all, " "))
			fmt.Printf("| %d %s | %s | %s | %s | %s |\n", n, what, label, m.total.Round(time.Millisecond),
				m.p(0.5).Round(10*time.Microsecond), m.p(0.99).Round(10*time.Microsecond))
		}
	}
	return nil
}

// prune makes n objects in a namespace of their own, then deletes them
// one by one as flux, timing each.
func prune(ctx context.Context, admin, flux client.Client, ns string, n int, object func(ns string, i int) client.Object) (timing, error) {
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return timing{}, err
	}
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = object(ns, i)
		if err := admin.Create(ctx, objs[i]); err != nil {
			return timing{}, err
		}
	}
	var t timing
	start := time.Now()
	for _, o := range objs {
		one := time.Now()
		if err := flux.Delete(ctx, o); err != nil {
			return timing{}, fmt.Errorf("the delete of %s/%s as Flux: %w", ns, o.GetName(), err)
		}
		t.each = append(t.each, time.Since(one))
	}
	t.total = time.Since(start)
	return t, nil
}

func configMap(ns string, i int) client.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"k": "v"}}
}

func optedInClaim(ns string, i int) client.Object {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("data-%04d", i),
		Annotations: map[string]string{guard.OptInAnnotation: "true"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

// grantFlux binds Flux's service account to cluster-admin, as Flux's
// installation does.
func grantFlux(ctx context.Context, c client.Client) error {
	return c.Create(ctx, fluxBinding())
}

// webhook is the guard served over TLS, registered or not.
type webhook struct {
	admin  client.Client
	served agenttls.Served
	config *admissionregistrationv1.ValidatingWebhookConfiguration
}

func newWebhook(admin client.Client) (*webhook, error) {
	mux := http.NewServeMux()
	mux.Handle(guardwebhook.Path, &admission.Webhook{Handler: &guardwebhook.Handler{Reader: admin}})
	served, err := agenttls.Serve(mux)
	if err != nil {
		return nil, err
	}
	url := served.Srv.URL + guardwebhook.Path
	return &webhook{admin: admin, served: served, config: guardwebhook.Configuration("strata-guard-bench",
		admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: served.CAPEM}, guardwebhook.DefaultUsers)}, nil
}

// set registers the webhook or removes it, and waits until the API
// server acts on it: a dry-run delete of an unannotated claim by Flux is
// refused exactly when it is registered.
func (w *webhook) set(ctx context.Context, on bool) error {
	cfg := w.config.DeepCopy()
	var err error
	if on {
		err = client.IgnoreAlreadyExists(w.admin.Create(ctx, cfg))
	} else {
		err = client.IgnoreNotFound(w.admin.Delete(ctx, cfg))
	}
	if err != nil {
		return err
	}
	return waitFor(ctx, w.admin, on)
}

func (w *webhook) close() { w.served.Srv.Close() }

func init() { log.SetOutput(os.Stderr) }
