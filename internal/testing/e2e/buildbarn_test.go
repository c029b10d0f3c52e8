package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/internal/testing/bbexample"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The homelab example's Buildbarn runs on the real nodes. Buildbarn's
// images cannot be pulled here, so the example app stands in for every
// container (cmd/example-app/buildbarn.go): it listens where the
// generated configuration says and reports what its pod gave it. The
// shards' claims bind on strata-fast, every component turns Ready, every
// Service has ready endpoints on its ports, the worker's runner starts
// from what the installer put in place, and a grown CAS grows the same
// claims online, which the shards, restarted with the new sizes, see.
func TestTheBuildbarnExampleRunsOnRealNodes(t *testing.T) {
	_, cl := start(t)
	ctx := context.Background()
	ns := namespaceFor(t, cl, "buildbarn")
	var storage *bbv1.BuildbarnStorage
	for _, obj := range bbexample.Objects(t, "20240310T090416Z-28dbdbb", "unused") {
		obj.SetNamespace(ns)
		obj.GetComponent().Image = stack.exampleApp
		switch o := obj.(type) {
		case *bbv1.BuildbarnWorker:
			o.Spec.RunnerImage, o.Spec.RunnerInstallerImage, o.Spec.VolumeInitImage = stack.exampleApp, stack.exampleApp, stack.exampleApp
		case *bbv1.BuildbarnStorage:
			storage = o
		}
		create(t, cl, obj.(client.Object))
	}

	for _, kind := range []client.ObjectList{&bbv1.BuildbarnStorageList{}, &bbv1.BuildbarnSchedulerList{}, &bbv1.BuildbarnFrontendList{},
		&bbv1.BuildbarnBrowserList{}, &bbv1.BuildbarnWorkerList{}} {
		waitReady(t, cl, ns, kind)
	}
	claims := shardClaims(t, cl, ns)
	for _, svc := range []struct {
		name  string
		ports []int32
		ready int
	}{{"storage", []int32{8981}, 2}, {"scheduler", []int32{8982, 8983, 7982}, 1}, {"frontend", []int32{8980}, 1}, {"browser", []int32{7984}, 1}} {
		waitEndpoints(t, cl, ns, svc.name, svc.ports, svc.ready)
	}
	shards := podsOf(t, cl, ns, "storage", 2)
	for _, pod := range shards {
		wantBody(t, fmt.Sprintf("http://%s:%d/", pod.Status.PodIP, config.StoragePort), "config /config/storage.json")
		wantSize(t, pod, config.CASPath, 1900<<20)
	}
	worker := podsOf(t, cl, ns, "worker", 1)[0]
	wantBody(t, fmt.Sprintf("http://%s:%d/", worker.Status.PodIP, config.DiagnosticsPort), "NODE_NAME="+worker.Spec.NodeName+"\nPOD_NAME="+worker.Name)
	if n := len(worker.Status.ContainerStatuses); n != 2 {
		t.Errorf("the worker's pod runs %d containers, want the worker and the runner", n)
	}

	uids := map[string]types.UID{}
	for _, claim := range claims {
		uids[claim.Name] = claim.UID
	}
	testenv.Update(t, cl, storage, func(s *bbv1.BuildbarnStorage) { s.Spec.CAS.BlocksSize = ptr.To(resource.MustParse("3Gi")) })
	for _, claim := range claims {
		if !strings.HasPrefix(claim.Name, "cas-") {
			continue
		}
		testenv.Eventually(t, 3*time.Minute, func() error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
				return err
			}
			if got := claim.Status.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("4Gi")) < 0 {
				return fmt.Errorf("claim %s has %s, want 4Gi", claim.Name, got.String())
			}
			return nil
		})
	}
	// The shards restart with the new sizes in their configuration (a
	// rolling update), on the same claims, which hold the larger
	// filesystems.
	waitReady(t, cl, ns, &bbv1.BuildbarnStorageList{})
	for _, pod := range podsOf(t, cl, ns, "storage", 2) {
		wantSize(t, pod, config.CASPath, 3900<<20)
	}
	for _, claim := range shardClaims(t, cl, ns) {
		if claim.UID != uids[claim.Name] {
			t.Errorf("claim %s was made again while its store grew", claim.Name)
		}
	}
}

// waitReady waits for every component of a kind to be Ready.
func waitReady(t *testing.T, cl client.Client, ns string, list client.ObjectList) {
	t.Helper()
	testenv.Eventually(t, 4*time.Minute, func() error {
		if err := cl.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		items, err := componentsOf(list)
		if err != nil || len(items) == 0 {
			return fmt.Errorf("no %T yet: %v", list, err)
		}
		for _, o := range items {
			if s := o.GetStatus(); s.State != bbv1.StateReady || s.ObservedGeneration != o.GetGeneration() {
				return fmt.Errorf("%s is %s at generation %d of %d (%d of %d ready): %v", o.GetName(), s.State, s.ObservedGeneration, o.GetGeneration(), s.ReadyReplicas, s.Replicas, s.Conditions)
			}
		}
		return nil
	})
}

func componentsOf(list client.ObjectList) ([]bbv1.Component, error) {
	objs, err := apimeta.ExtractList(list)
	var out []bbv1.Component
	for _, o := range objs {
		out = append(out, o.(bbv1.Component))
	}
	return out, err
}

// shardClaims are the six claims of the two shards, each Bound on
// strata-fast.
func shardClaims(t *testing.T, cl client.Client, ns string) []*corev1.PersistentVolumeClaim {
	t.Helper()
	var claims []*corev1.PersistentVolumeClaim
	testenv.Eventually(t, 3*time.Minute, func() error {
		list := &corev1.PersistentVolumeClaimList{}
		if err := cl.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		claims = nil
		for i := range list.Items {
			c := &list.Items[i]
			if c.Status.Phase != corev1.ClaimBound || ptr.Deref(c.Spec.StorageClassName, "") != "strata-fast" {
				return fmt.Errorf("claim %s is %s on %v", c.Name, c.Status.Phase, ptr.Deref(c.Spec.StorageClassName, ""))
			}
			claims = append(claims, c)
		}
		if len(claims) != 6 {
			return fmt.Errorf("%d claims, want cas, ac and fsac of two shards", len(claims))
		}
		return nil
	})
	return claims
}

// waitEndpoints waits for a Service's EndpointSlices to hold ready
// endpoints on its ports.
func waitEndpoints(t *testing.T, cl client.Client, ns, svc string, ports []int32, ready int) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		list := &discoveryv1.EndpointSliceList{}
		if err := cl.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
			return err
		}
		var got []int32
		n := 0
		for _, s := range list.Items {
			for _, p := range s.Ports {
				got = append(got, ptr.Deref(p.Port, 0))
			}
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					n++
				}
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(ports))
		if !slices.Equal(got, want) || n != ready {
			return fmt.Errorf("Service %s has ports %v and %d ready endpoints, want %v and %d", svc, got, n, want, ready)
		}
		return nil
	})
}

// podsOf returns a component's running pods.
func podsOf(t *testing.T, cl client.Client, ns, component string, want int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	testenv.Eventually(t, 2*time.Minute, func() error {
		list := &corev1.PodList{}
		if err := cl.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/component": component}); err != nil {
			return err
		}
		pods = nil
		for i := range list.Items {
			if p := &list.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				pods = append(pods, p)
			}
		}
		if len(pods) != want {
			return fmt.Errorf("%d %s pods running, want %d", len(pods), component, want)
		}
		return nil
	})
	return pods
}

func wantBody(t *testing.T, url, says string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		body, err := fetch(url)
		if err == nil && !strings.Contains(body, says) {
			err = fmt.Errorf("%s answers %q, want %q in it", url, body, says)
		}
		return err
	})
}

// wantSize waits for the pod to see a filesystem of at least min bytes
// at dir.
func wantSize(t *testing.T, pod *corev1.Pod, dir string, min int64) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		body, err := fetch(fmt.Sprintf("http://%s:%d/size%s", pod.Status.PodIP, config.StoragePort, dir))
		if err != nil {
			return err
		}
		var size int64
		if _, err := fmt.Sscan(body, &size); err != nil {
			return err
		}
		if size < min {
			return fmt.Errorf("shard %s sees %d bytes at %s, want at least %d", pod.Name, size, dir, min)
		}
		return nil
	})
}
