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

// floorWorkers is how many requests the floor, and each request kind's
// cost, sends at once.
const floorWorkers = 32

// measureFloor sends the objects of every Kustomization as bare
// server-side apply patches, floorWorkers at a time, on a fresh control
// plane once it is idle: no git, no kustomize, no inventory, no status,
// no events, no client rate limit. No engine that applies the same
// objects can be faster; the engine's target is twice this.
func measureFloor(cfg config) (floorResult, error) {
	var res floorResult
	b, err := newBench(cfg)
	if err != nil {
		return res, err
	}
	defer b.close()
	ctx := context.Background()
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		return res, err
	}
	objs, err := floorObjects(cfg)
	if err != nil {
		return res, err
	}
	c, err := unlimitedClient(b)
	if err != nil {
		return res, err
	}
	if _, err := waitIdle(time.Minute); err != nil {
		return res, err
	}
	machine, apiServer, etcd := machineCPU(), childrenCPU("kube-apiserver"), childrenCPU("etcd")
	start := time.Now()
	err = inParallel(len(objs), func(i int) error { return applyCreating(ctx, c, objs[i]) })
	res.took = time.Since(start)
	res.machineCPU, res.apiServerCPU, res.etcdCPU = machineCPU()-machine, childrenCPU("kube-apiserver")-apiServer, childrenCPU("etcd")-etcd
	return res, err
}

// floorResult is the floor's time and the CPU seconds it took.
type floorResult struct {
	took                              time.Duration
	apiServerCPU, etcdCPU, machineCPU float64
}

// applyCreating is the floor's request: a bare server-side apply patch.
func applyCreating(ctx context.Context, c client.Client, u *unstructured.Unstructured, opts ...client.PatchOption) error {
	//nolint:staticcheck // the plain apply patch is what the floor measures
	err := c.Patch(ctx, u, client.Apply, append([]client.PatchOption{client.FieldOwner("floor"), client.ForceOwnership}, opts...)...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// unlimitedClient talks to b's API server with no client-side rate limit.
func unlimitedClient(b *bench) (client.Client, error) {
	rc := rest.CopyConfig(b.cp.Config)
	rc.QPS, rc.Burst = -1, 0
	return client.New(rc, client.Options{Scheme: scheme.New()})
}

// inParallel calls send for 0..n-1, floorWorkers at a time, every call
// made even after one fails, and returns the first error.
func inParallel(n int, send func(i int) error) error {
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range floorWorkers {
		wg.Go(func() {
			for i := range next {
				if err := send(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
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
