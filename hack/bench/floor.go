package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/internal/scheme"
)

// floorWorkers is how many patches the floor sends at once.
const floorWorkers = 32

// measureFloor sends the objects of every Kustomization as bare
// server-side apply patches, floorWorkers at a time, on a fresh control
// plane: no git, no kustomize, no inventory, no status, no events, no
// client rate limit. No engine that applies the same objects can be
// faster; the engine's target is twice this.
func measureFloor(cfg config) (time.Duration, error) {
	b, err := newBench(cfg)
	if err != nil {
		return 0, err
	}
	defer b.close()
	ctx := context.Background()
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		return 0, err
	}
	objs, err := floorObjects(cfg)
	if err != nil {
		return 0, err
	}
	rc := rest.CopyConfig(b.cp.Config)
	rc.QPS, rc.Burst = -1, 0 // no client-side limit
	c, err := client.New(rc, client.Options{Scheme: scheme.New()})
	if err != nil {
		return 0, err
	}
	next := make(chan *unstructured.Unstructured)
	errs := make(chan error, floorWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	for range floorWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var failed error
			for u := range next { // drained to the end, so that the sender never blocks
				//nolint:staticcheck // the plain apply patch is what the floor measures
				if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("floor"), client.ForceOwnership); err != nil && failed == nil {
					failed = fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
				}
			}
			errs <- failed
		}()
	}
	for _, u := range objs {
		next <- u
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return took, err
		}
	}
	return took, nil
}

// floorObjects are the objects the Kustomizations apply, in the namespace
// they target.
func floorObjects(cfg config) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i := range cfg.kustomizations {
		for _, doc := range strings.Split(objects(name(i, cfg.infra), "0"), "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, err
			}
			u.SetNamespace("bench")
			out = append(out, u)
		}
	}
	return out, nil
}
