package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// observe sends the objects list selects and then every later state of
// them as the API server reports it, until ctx ends. The bench waits on
// watches rather than polling: a poll loop loads the API server it
// measures and rounds every figure up to its period.
func (b *bench) observe(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (<-chan client.Object, error) {
	out := make(chan client.Object, 64)
	items, w, err := b.listAndWatch(ctx, list.DeepCopyObject().(client.ObjectList), opts)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(out)
		for {
			for _, obj := range items {
				send(ctx, out, obj)
			}
			b.forward(ctx, w, out)
			if ctx.Err() != nil {
				return
			}
			// The watch ended early (a timeout or a compaction): start
			// again from a fresh list, which holds the latest states.
			if items, w, err = b.listAndWatch(ctx, list.DeepCopyObject().(client.ObjectList), opts); err != nil {
				return
			}
		}
	}()
	return out, nil
}

// listAndWatch lists and opens a watch from the list's resourceVersion, so
// that no change between the two is missed.
func (b *bench) listAndWatch(ctx context.Context, list client.ObjectList, opts []client.ListOption) ([]client.Object, watch.Interface, error) {
	if err := b.c.List(ctx, list, opts...); err != nil {
		return nil, nil, err
	}
	raw, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, nil, err
	}
	items := make([]client.Object, 0, len(raw))
	for _, item := range raw {
		if obj, ok := item.(client.Object); ok {
			items = append(items, obj)
		}
	}
	w, err := b.c.Watch(ctx, list, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})...)
	return items, w, err
}

func (b *bench) forward(ctx context.Context, w watch.Interface, out chan<- client.Object) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			if obj, ok := ev.Object.(client.Object); ok && ev.Type != watch.Deleted {
				send(ctx, out, obj)
			}
		}
	}
}

func send(ctx context.Context, out chan<- client.Object, obj client.Object) {
	select {
	case out <- obj:
	case <-ctx.Done():
	}
}

// cpuProfile writes a CPU profile of the controller's first d to file,
// from its profiler, polled until it answers.
func (b *bench) cpuProfile(file string, d time.Duration) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.pprof, int(d.Seconds()))
	var data []byte
	err := poll(30*time.Second, 5*time.Millisecond, func() error {
		resp, err := http.Get(url) //nolint:noctx,gosec // a loopback address of the bench's own
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(resp.Body)
		return err
	})
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}
