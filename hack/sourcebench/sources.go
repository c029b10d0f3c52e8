package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/internal/local/objectstore"
	"github.com/strata-gitops/strata/internal/local/ociartifact"
	"github.com/strata-gitops/strata/internal/local/registry"
)

const ns = "bench"

// world is the bench's cluster and producers.
type world struct {
	ctx       context.Context
	c         client.Client
	root, dir string
	receiver  string
	hooks     map[string]string
}

func manifest(kind string, i int) []byte {
	return []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  push: %q\n", kind, ns, fmt.Sprint(i)))
}

// sources starts the three producers, the sources, Kustomizations and
// Receivers, and waits for push 0 to be applied from each.
func (w *world) sources() ([]kind, func(), error) {
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	if err := w.c.Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, stop, err
	}
	git, err := w.gitKind()
	if err != nil {
		return nil, stop, err
	}
	oci, stopRegistry, err := w.ociKind()
	stops = append(stops, stopRegistry)
	if err != nil {
		return nil, stop, err
	}
	bucket, stopMinIO, err := w.bucketKind()
	stops = append(stops, stopMinIO)
	if err != nil {
		return nil, stop, err
	}
	kinds := []kind{git, oci, bucket}
	w.hooks = map[string]string{}
	for _, k := range kinds {
		if err := w.receiverFor(k.name); err != nil {
			return nil, stop, err
		}
		if err := w.waitApplied(k.name, 0); err != nil {
			return nil, stop, fmt.Errorf("the first apply of %s: %w", k.name, err)
		}
	}
	return kinds, stop, nil
}

func (w *world) gitKind() (kind, error) {
	gitRoot := filepath.Join(w.dir, "git")
	if err := gitserver.InitBare(filepath.Join(gitRoot, "bench.git"), "main"); err != nil {
		return kind{}, err
	}
	h, err := gitserver.Handler(gitRoot, func(string) {})
	if err != nil {
		return kind{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return kind{}, err
	}
	go func() { _ = http.Serve(ln, h) }() //nolint:gosec
	url := "http://" + ln.Addr().String() + "/bench.git"
	work := filepath.Join(w.dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return kind{}, err
	}
	commit := func(i int) error {
		if err := os.WriteFile(filepath.Join(work, "git.yaml"), manifest("git", i), 0o644); err != nil {
			return err
		}
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", fmt.Sprint(i)}, {"push", "-q", "origin", "main"}} {
			if _, err := gitserver.Run(work, args...); err != nil {
				return err
			}
		}
		return nil
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.email", "bench@strata.dev"}, {"config", "user.name", "bench"},
		{"remote", "add", "origin", url}} {
		if _, err := gitserver.Run(work, args...); err != nil {
			return kind{}, err
		}
	}
	if err := commit(0); err != nil {
		return kind{}, err
	}
	src := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		Spec: sourcev1.GitRepositorySpec{URL: url, Interval: metav1.Duration{Duration: time.Hour}, Reference: &sourcev1.GitRepositoryRef{Branch: "main"}}}
	return kind{name: "git", push: func(_ context.Context, i int) error { return commit(i) }}, w.create(src, sourcev1.GitRepositoryKind, "git")
}

func (w *world) ociKind() (kind, func(), error) {
	addr := freeAddr()
	cmd, err := registry.Start(w.ctx, filepath.Join(w.root, "bin", "registry"), filepath.Join(w.dir, "registry"), addr, filepath.Join(w.dir, "registry.log"))
	if err != nil {
		return kind{}, func() {}, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	push := func(ctx context.Context, i int) error {
		_, err := ociartifact.Push(ctx, addr+"/bench/manifests:latest", map[string][]byte{"oci.yaml": manifest("oci", i)}, "bench", fmt.Sprint(i))
		return err
	}
	if err := push(w.ctx, 0); err != nil {
		return kind{}, stop, err
	}
	src := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "oci", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{URL: "oci://" + addr + "/bench/manifests", Insecure: true,
			Reference: &sourcev1.OCIRepositoryRef{Tag: "latest"}, Interval: metav1.Duration{Duration: time.Hour}}}
	return kind{name: "oci", push: push}, stop, w.create(src, sourcev1.OCIRepositoryKind, "oci")
}

func (w *world) bucketKind() (kind, func(), error) {
	srv, err := objectstore.Start(w.ctx, filepath.Join(w.root, "bin", "minio"), filepath.Join(w.dir, "minio"), freeAddr(), freeAddr(),
		filepath.Join(w.dir, "minio.log"), "bench", "bench-secret-key")
	if err != nil {
		return kind{}, func() {}, err
	}
	endpoint := srv.Endpoint[len("http://"):]
	s3, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, "")})
	if err != nil {
		return kind{}, srv.Stop, err
	}
	if err := s3.MakeBucket(w.ctx, "bench", minio.MakeBucketOptions{}); err != nil {
		return kind{}, srv.Stop, err
	}
	push := func(ctx context.Context, i int) error {
		data := manifest("bucket", i)
		_, err := s3.PutObject(ctx, "bench", "bucket.yaml", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	}
	if err := push(w.ctx, 0); err != nil {
		return kind{}, srv.Stop, err
	}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		StringData: map[string]string{"accesskey": srv.AccessKey, "secretkey": srv.SecretKey}}
	if err := w.c.Create(w.ctx, keys); err != nil {
		return kind{}, srv.Stop, err
	}
	src := &sourcev1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Namespace: ns},
		Spec: sourcev1.BucketSpec{BucketName: "bench", Endpoint: endpoint, Insecure: true,
			SecretRef: &meta.LocalObjectReference{Name: "s3"}, Interval: metav1.Duration{Duration: time.Hour}}}
	return kind{name: "bucket", push: push}, srv.Stop, w.create(src, sourcev1.BucketKind, "bucket")
}

// create makes the source and a Kustomization of its root.
func (w *world) create(src client.Object, kindName, name string) error {
	if err := w.c.Create(w.ctx, src); err != nil {
		return err
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: kindName, Name: name}}}
	return w.c.Create(w.ctx, ks)
}

// receiverFor makes a generic Receiver for the named source.
func (w *world) receiverFor(name string) error {
	kinds := map[string]string{"git": sourcev1.GitRepositoryKind, "oci": sourcev1.OCIRepositoryKind, "bucket": sourcev1.BucketKind}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-" + name, Namespace: ns}, StringData: map[string]string{"token": name}}
	if err := w.c.Create(w.ctx, token); err != nil {
		return err
	}
	rcv := &notificationv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: notificationv1.ReceiverSpec{Type: notificationv1.GenericReceiver, SecretRef: &meta.LocalObjectReference{Name: token.Name},
			Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{
				APIVersion: sourcev1.GroupVersion.String(), Kind: kinds[name], Name: name}}}}}
	if err := w.c.Create(w.ctx, rcv); err != nil {
		return err
	}
	w.hooks[name] = "http://" + w.receiver + rcv.GetWebhookPath(name)
	return nil
}

func (w *world) configMapValue(name string) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return "", err
	}
	return cm.Data["push"], nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
