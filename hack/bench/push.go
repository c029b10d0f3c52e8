package main

import (
	"context"
	"fmt"
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
	for i := 0; i < 300; i++ {
		resp, err := http.Post(url, "application/json", nil) //nolint:noctx
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				b.hookURL.Store(url)
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("receiver never became ready")
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
	start := time.Now()
	if err := git(b.work, "push", "-q", "origin", "main"); err != nil {
		return 0, err
	}
	var fetched time.Duration
	for {
		if fetched == 0 && b.sourceMoved() {
			fetched = time.Since(start)
		}
		cm := &corev1.ConfigMap{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: "bench", Name: target}, cm); err == nil && cm.Data["version"] == version {
			break
		}
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("push %d not applied within a minute", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	applied := time.Since(start)
	if fetched == 0 {
		fetched = applied
		if !b.sourceMoved() {
			return 0, fmt.Errorf("push %d applied but the source revision did not move", i)
		}
	}
	b.fetchLatencies = append(b.fetchLatencies, fetched)
	return applied, nil
}

// sourceMoved reports whether the GitRepository has a revision newer than
// the last one seen, and records it.
func (b *bench) sourceMoved() bool {
	repo := &sourcev1.GitRepository{}
	err := b.c.Get(context.Background(), client.ObjectKey{Namespace: "flux-system", Name: "bench"}, repo)
	if err != nil || repo.Status.Artifact == nil || repo.Status.Artifact.Revision == b.lastRevision {
		return false
	}
	b.lastRevision = repo.Status.Artifact.Revision
	return true
}
