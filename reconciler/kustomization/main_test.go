package kustomization_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// stack is a namespace, a git repository served over HTTP, a GitRepository
// for it and a running strata controller.
type stack struct {
	t         *testing.T
	env       *testenv.Env
	c         client.Client
	repo      *testenv.Repo
	ns        string
	dir       string
	receiver  string
	stopFuncs []func()
	// options tweak the controller's flags.
	options []func(*manager.Options)
}

var counter atomic.Int32

const timeout = 30 * time.Second

func newStack(t *testing.T, options ...func(*manager.Options)) *stack {
	t.Helper()
	env := testenv.Get(t)
	s := &stack{t: t, env: env, c: env.Client, dir: t.TempDir(), options: options}
	s.ns = fmt.Sprintf("ks-%d-%d", os.Getpid(), counter.Add(1))
	if err := s.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
		t.Fatal(err)
	}
	s.repo = testenv.NewGitServer(t).NewRepo(t, "cluster")
	s.startController()
	return s
}

// startController runs a strata controller; several may run in turn
// against the same state, as after a restart.
func (s *stack) startController() {
	s.t.Helper()
	if s.receiver == "" {
		s.receiver = testenv.FreeAddr(s.t)
	}
	o := manager.Defaults()
	o.MetricsAddr, o.HealthProbeAddr, o.ArtifactAddr = "0", "0", "0"
	o.ReceiverAddr = s.receiver
	o.ArtifactDir = s.dir
	o.SkipNameValidation = true
	o.WatchLabelSelector = "strata.dev/test=" + s.ns
	for _, tweak := range s.options {
		tweak(&o)
	}
	stop := testenv.RunManagerFrom(s.t, func(ctx context.Context) (testenv.Manager, error) {
		return manager.New(ctx, s.env.Config, o)
	})
	s.stopFuncs = append(s.stopFuncs, stop)
}

func (s *stack) stopController() {
	for _, stop := range s.stopFuncs {
		stop()
	}
	s.stopFuncs = nil
}

// labels marks objects as this test's shard, so concurrent tests' controllers
// do not reconcile each other's Kustomizations.
func (s *stack) labels() map[string]string { return map[string]string{"strata.dev/test": s.ns} }

// push commits files (path -> content, "" deletes) and pushes main.
func (s *stack) push(files map[string]string) string {
	s.t.Helper()
	write := map[string]string{}
	for p, c := range files {
		if c == "" {
			s.repo.Remove(p)
		} else {
			write[p] = c
		}
	}
	s.repo.Write(write)
	hash := s.repo.Commit("change")
	s.repo.Push()
	return "main@sha1:" + hash
}

// source creates the GitRepository and waits for its first artifact.
func (s *stack) source(revision string) {
	s.t.Helper()
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "flux-system", Namespace: s.ns, Labels: s.labels()},
		Spec: sourcev1.GitRepositorySpec{URL: s.repo.URL, Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"}},
	}
	if err := s.c.Create(context.Background(), repo); err != nil {
		s.t.Fatal(err)
	}
	s.waitSource(revision)
}

// refresh asks the GitRepository to fetch now and waits for revision.
func (s *stack) refresh(revision string) {
	s.t.Helper()
	s.request(&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "flux-system", Namespace: s.ns}})
	s.waitSource(revision)
}

func (s *stack) waitSource(revision string) {
	s.t.Helper()
	testenv.Eventually(s.t, timeout, func() error {
		repo := &sourcev1.GitRepository{}
		if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "flux-system"}, repo); err != nil {
			return err
		}
		if repo.Status.Artifact == nil || repo.Status.Artifact.Revision != revision {
			return fmt.Errorf("source at %+v, want %s; conditions %+v", repo.Status.Artifact, revision, repo.Status.Conditions)
		}
		return nil
	})
}

// request sets reconcile.fluxcd.io/requestedAt, as `flux reconcile` does.
func (s *stack) request(obj client.Object) string {
	s.t.Helper()
	at := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, at)
	if err := s.c.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		s.t.Fatal(err)
	}
	return at
}

// waitHandled waits until name has handled the request made at at.
func (s *stack) waitHandled(name, at string) {
	s.t.Helper()
	testenv.Eventually(s.t, timeout, func() error {
		if got := s.get(name).Status.LastHandledReconcileAt; got != at {
			return fmt.Errorf("%s: lastHandledReconcileAt %q, want %q", name, got, at)
		}
		return nil
	})
}

// applied pushes files, makes a Kustomization name of path and waits until
// it applied them; it returns the revision.
func (s *stack) applied(name, path string, files map[string]string) string {
	s.t.Helper()
	rev := s.push(files)
	s.source(rev)
	s.kustomization(name, path, nil)
	s.waitReady(name, rev)
	return rev
}

// kustomization creates a Kustomization of path built from the repository.
func (s *stack) kustomization(name, path string, mutate func(*kustomizev1.Kustomization)) *kustomizev1.Kustomization {
	s.t.Helper()
	ks := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: s.labels()},
		Spec: kustomizev1.KustomizationSpec{
			Interval:        metav1.Duration{Duration: time.Hour},
			Path:            path,
			Prune:           true,
			SourceRef:       kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "flux-system"},
			TargetNamespace: s.ns,
		},
	}
	if mutate != nil {
		mutate(ks)
	}
	if err := s.c.Create(context.Background(), ks); err != nil {
		s.t.Fatal(err)
	}
	return ks
}

func (s *stack) get(name string) *kustomizev1.Kustomization {
	s.t.Helper()
	ks := &kustomizev1.Kustomization{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: name}, ks); err != nil {
		s.t.Fatal(err)
	}
	return ks
}

// waitReady waits for Ready=True with revision applied.
func (s *stack) waitReady(name, revision string) *kustomizev1.Kustomization {
	s.t.Helper()
	var ks *kustomizev1.Kustomization
	testenv.Eventually(s.t, timeout, func() error {
		ks = s.get(name)
		c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || ks.Status.LastAppliedRevision != revision || ks.Status.ObservedGeneration != ks.Generation {
			return fmt.Errorf("%s: want Ready at %s, have applied %q, conditions %+v", name, revision, ks.Status.LastAppliedRevision, ks.Status.Conditions)
		}
		return nil
	})
	return ks
}

// waitCondition waits for a condition with status and reason whose message
// contains every fragment.
func (s *stack) waitCondition(name, kind string, status metav1.ConditionStatus, reason string, fragments ...string) *kustomizev1.Kustomization {
	s.t.Helper()
	var ks *kustomizev1.Kustomization
	testenv.Eventually(s.t, timeout, func() error {
		ks = s.get(name)
		c := apimeta.FindStatusCondition(ks.Status.Conditions, kind)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s: want %s=%s/%s, have %+v", name, kind, status, reason, ks.Status.Conditions)
		}
		for _, f := range fragments {
			if !strings.Contains(c.Message, f) {
				return fmt.Errorf("%s: %s message %q lacks %q", name, kind, c.Message, f)
			}
		}
		return nil
	})
	return ks
}

// exists reports whether the object is in the cluster and not being deleted.
func (s *stack) exists(obj client.Object) bool {
	s.t.Helper()
	if obj.GetNamespace() == "" && !isClusterScoped(obj) {
		obj.SetNamespace(s.ns)
	}
	err := s.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && client.IgnoreNotFound(err) != nil {
		s.t.Fatal(err)
	}
	return err == nil && obj.GetDeletionTimestamp() == nil
}

func isClusterScoped(obj client.Object) bool {
	switch obj.(type) {
	case *corev1.PersistentVolume, *corev1.Namespace:
		return true
	}
	return false
}

func configMap(name string, data ...string) string {
	out := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
	if len(data) == 0 {
		data = []string{"key", "value"}
	}
	for i := 0; i+1 < len(data); i += 2 {
		out += fmt.Sprintf("  %s: %q\n", data[i], data[i+1])
	}
	return out
}

func pvc(name, storageClass string, annotations ...string) string {
	ann := ""
	if len(annotations) > 0 {
		ann = "  annotations:\n"
		for i := 0; i+1 < len(annotations); i += 2 {
			ann += fmt.Sprintf("    %s: %q\n", annotations[i], annotations[i+1])
		}
	}
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %s
%sspec:
  accessModes: [ReadWriteOnce]
  storageClassName: %s
  resources:
    requests:
      storage: 1Gi
`, name, ann, storageClass)
}
