// Command guardbench measures what the data-loss guard for Flux's prunes
// (reconciler/guardwebhook) adds to a prune: Flux's kustomize-controller's
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
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/guardtest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/guard"
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
	if err := env.Client.Create(ctx, testenv.FluxKustomizeControllerBinding()); err != nil {
		return err
	}
	hook, err := guardtest.Serve(env.Client, env.Config, "strata-guard-bench", "default")
	if err != nil {
		return err
	}
	defer hook.Close()
	flux := hook.Flux()
	results := map[string][]timing{}
	for r := range rounds {
		// Each round swaps which goes first, so that neither gains from
		// its place (a warmer API server, a fuller etcd).
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, on := range order {
			if err := hook.Register(ctx, on); err != nil {
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
	return guardtest.Claim(ns, fmt.Sprintf("data-%04d", i), map[string]string{guard.OptInAnnotation: "true"})
}
