package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (b *bench) pushLatencies() ([]time.Duration, error) {
	if err := b.setupReceiver(); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := 1; i <= b.pushes; i++ {
		d, err := b.measurePush(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
		// Measure each push from a settled controller: the next push waits
		// until every Kustomization has recorded this revision.
		if err := b.waitAllReady(b.lastRevision, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setupReceiver creates a generic Receiver for the source and waits until
// it answers; the git server calls it after every push.
func (b *bench) setupReceiver() error {
	ctx := context.Background()
	if err := b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "flux-system"},
		StringData: map[string]string{"token": "bench"}}); err != nil {
		return err
	}
	rcv := &notificationv1.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "flux-system"},
		Spec: notificationv1.ReceiverSpec{Type: notificationv1.GenericReceiver, SecretRef: &meta.LocalObjectReference{Name: "hook"},
			Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{
				APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind, Name: "bench"}}}},
	}
	if err := b.c.Create(ctx, rcv); err != nil {
		return err
	}
	url := "http://" + b.receiver + rcv.GetWebhookPath("bench")
	err := poll(30*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Post(url, "application/json", nil) //nolint:noctx
		if err != nil {
			return fmt.Errorf("the receiver at %s, 30 s after it was created: %w", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the receiver at %s, 30 s after it was created: %s", url, resp.Status)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.hookURL.Store(url)
	return nil
}

// measurePush commits a change to one app, pushes it and returns the time
// until the change is in the cluster; it also records when the new
// artifact was stored.
func (b *bench) measurePush(i int) (time.Duration, error) {
	ctx := context.Background()
	target := name(b.infra, b.infra)
	version := fmt.Sprint(i)
	if err := os.WriteFile(filepath.Join(b.work, target, "objects.yaml"), []byte(objects(target, version)), 0o644); err != nil {
		return 0, err
	}
	if err := git(b.work, "commit", "-q", "-am", "push "+version); err != nil {
		return 0, err
	}
	watchCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	configMaps, err := b.observe(watchCtx, &corev1.ConfigMapList{}, client.InNamespace("bench"), client.MatchingFields{"metadata.name": target})
	if err != nil {
		return 0, err
	}
	sources, err := b.observe(watchCtx, &sourcev1.GitRepositoryList{}, client.InNamespace("flux-system"), client.MatchingFields{"metadata.name": "bench"})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := git(b.work, "push", "-q", "origin", "main"); err != nil {
		return 0, err
	}
	var fetched, applied time.Duration
	for fetched == 0 || applied == 0 {
		select {
		case obj, ok := <-sources:
			if !ok {
				return 0, fmt.Errorf("push %d: the source revision did not move within a minute", i)
			}
			repo := obj.(*sourcev1.GitRepository)
			if fetched == 0 && repo.Status.Artifact != nil && repo.Status.Artifact.Revision != b.lastRevision {
				// Both watches race to deliver; the artifact came first.
				fetched = min(time.Since(start), nonZero(applied))
				b.lastRevision = repo.Status.Artifact.Revision
			}
		case obj, ok := <-configMaps:
			if !ok {
				return 0, fmt.Errorf("push %d not applied within a minute", i)
			}
			if applied == 0 && obj.(*corev1.ConfigMap).Data["version"] == version {
				applied = time.Since(start)
			}
		}
	}
	b.fetchLatencies = append(b.fetchLatencies, fetched)
	return applied, nil
}

func nonZero(d time.Duration) time.Duration {
	if d == 0 {
		return time.Duration(math.MaxInt64)
	}
	return d
}
