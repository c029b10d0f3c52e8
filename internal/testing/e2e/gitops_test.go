package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// A static PersistentVolume from Git, pinned to one node, is bound to
// the claim from Git and used by a pod scheduled to that node. Removing
// the claim from Git while the pod reads it leaves the claim in place:
// the guard blocks its prune and says so on the Kustomization.
func TestStaticVolumeFromGitAndTheGuard(t *testing.T) {
	c, cl := start(t)
	ctx := context.Background()
	ns := namespaceFor(t, cl, "gitops")
	node := c.Nodes[0]
	inside := "/var/lib/strata/static/" + ns
	onHost, _ := node.HostPath(inside)
	if err := os.MkdirAll(onHost, 0o755); err != nil {
		t.Fatal(err)
	}
	git := testenv.NewGitServerOn(t, c.HostIP().String())
	repo := git.NewRepo(t, ns)
	repo.Write(map[string]string{
		"pv.yaml":  staticVolume(ns, inside, node.Name()),
		"pvc.yaml": fmt.Sprintf(staticClaim, ns),
		"pod.yaml": fmt.Sprintf(staticPod, ns),
	})
	repo.Commit("static volume")
	repo.Push()
	source := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "storage", Namespace: ns}, Spec: sourcev1.GitRepositorySpec{
		URL: repo.URL, Interval: metav1.Duration{Duration: 10 * time.Second}, Reference: &sourcev1.GitRepositoryRef{Branch: "main"}}}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "storage", Namespace: ns}, Spec: kustomizev1.KustomizationSpec{
		Interval: metav1.Duration{Duration: 10 * time.Second}, Path: "./", Prune: true,
		SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: source.Name}}}
	create(t, cl, source, ks)
	// The chart's policy: the API server adds Flux's finalizer as they are
	// created, so strata's first reconciles send no patch for it.
	for _, o := range []client.Object{source, ks} {
		if !slices.Contains(o.GetFinalizers(), kustomization.Finalizer) {
			t.Errorf("%T %s was created with finalizers %v: the chart's policy did not add %s", o, o.GetName(), o.GetFinalizers(), kustomization.Finalizer)
		}
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}}
	first := waitServing(t, pod)
	if pod.Spec.NodeName != node.Name() {
		t.Fatalf("the pod of the static volume on %s runs on %s", node.Name(), pod.Spec.NodeName)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "static"}, claim); err != nil || claim.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim static: %v, phase %s", err, claim.Status.Phase)
	}

	repo.Remove("pvc.yaml")
	revision := repo.Commit("claim removed")
	repo.Push()
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return err
		}
		if ks.Status.LastAppliedRevision != "main@sha1:"+revision {
			return fmt.Errorf("Kustomization at %q, want %s: %v", ks.Status.LastAppliedRevision, revision, ks.Status.Conditions)
		}
		if cond := apimeta.FindStatusCondition(ks.Status.Conditions, "DataProtected"); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Kustomization has no DataProtected condition: %v", ks.Status.Conditions)
		}
		return nil
	})
	if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil || claim.DeletionTimestamp != nil {
		t.Fatalf("the claim removed from Git was deleted while its pod reads it: %v %v", err, claim.DeletionTimestamp)
	}
	if cond := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("the Kustomization is not Ready after the guard kept the claim: %v", cond)
	}
	if read := waitServing(t, pod); read != first {
		t.Fatalf("the pod read %q after the prune, %q before", read, first)
	}
}

func staticVolume(ns, path, node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: static-%[1]s
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: %[1]s, name: static}
  local: {path: %[2]s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/hostname, operator: In, values: [%[3]s]}
`, ns, path, node)
}

const staticClaim = `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: static
  namespace: %[1]s
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: static-%[1]s
  resources: {requests: {storage: 1Gi}}
`

const staticPod = `apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: %[1]s
spec:
  containers:
    - name: app
      image: strata.local/strata/example-app:local
      imagePullPolicy: IfNotPresent
      args: [serve, /data]
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: static}
`
