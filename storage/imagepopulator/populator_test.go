package imagepopulator_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/imagepopulator"
	"github.com/strata-gitops/strata/storage/images/cache"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const timeout = 30 * time.Second

var counter atomic.Int32

// world is an API server running the populator, with a strata class
// that waits for the first consumer, a VolumeImage with credentials,
// and a namespace for the populator's own objects.
type world struct {
	c          client.Client
	ns, system string
}

func newWorld(t *testing.T) *world { return newWorldRetrying(t, 200*time.Millisecond) }

// newWorldRetrying is newWorld whose populator waits retry after a
// first failed fill.
func newWorldRetrying(t *testing.T, retry time.Duration) *world {
	t.Helper()
	env := testenv.Get(t)
	n := counter.Add(1)
	w := &world{c: env.Client, ns: testenv.Namespace(t, env.Client, fmt.Sprintf("pop-apps-%d", n)),
		system: testenv.Namespace(t, env.Client, fmt.Sprintf("pop-system-%d", n))}
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	if n == 1 {
		w.create(t,
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "pop-fast"}, Provisioner: storagev1alpha1.CSIDriver, VolumeBindingMode: &wait},
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "pop-other"}, Provisioner: "rancher.io/local-path"})
	}
	w.create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "bucket"},
			StringData: map[string]string{"accessKey": "access", "secretKey": "secret"}},
		&storagev1alpha1.VolumeImage{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "debian"},
			Spec: storagev1alpha1.VolumeImageSpec{URL: "http://minio.lan:9000/images/debian.qcow2", Format: "qcow2",
				SHA256:               strings.Repeat("ab", 32),
				CredentialsSecretRef: &storagev1alpha1.LocalObjectReference{Name: "bucket"}}})
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return (&imagepopulator.Reconciler{Client: mgr.GetClient(), Namespace: w.system, Image: "strata.local/strata:local",
			CacheDir: "/var/lib/strata/images/cache", Endpoints: []string{"http://minio.lan:9000"},
			Events: mgr.GetEventRecorder("strata-populator"), Retry: retry}).SetupWithManager(mgr)
	})
	return w
}

func (w *world) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := w.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// claim is a 1 GiB block claim of class filled from the VolumeImage.
func (w *world) claim(name, class string) *corev1.PersistentVolumeClaim {
	group, block := storagev1alpha1.GroupVersion.Group, corev1.PersistentVolumeBlock
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &class, VolumeMode: &block, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:     corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		DataSourceRef: &corev1.TypedObjectReference{APIGroup: &group, Kind: storagev1alpha1.VolumeImageKind, Name: "debian"},
	}}
}

// eventually polls get until check passes.
func eventually[T client.Object](t *testing.T, c client.Client, key client.ObjectKey, obj T, check func(T) error) T {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		return check(obj)
	})
	return obj
}

// A claim is filled on the node the scheduler chose: a prime claim
// there, a pod that fills it (tried again when it fails, with the
// reason in an event), and then its volume bound to the claim, with
// nothing of the populator's left.
func TestAClaimIsFilledOnItsNodeAndGetsTheVolume(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pvc := w.claim("vm-disk", "pop-fast")
	w.create(t, pvc)
	// Until the scheduler picks a node, nothing is made.
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.system, Name: "populate-" + string(pvc.UID)}, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a prime claim before a node was chosen: %v", err)
	}
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	if err := w.c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	primeKey := client.ObjectKey{Namespace: w.system, Name: "populate-" + string(pvc.UID)}
	prime := eventually(t, w.c, primeKey, &corev1.PersistentVolumeClaim{}, func(p *corev1.PersistentVolumeClaim) error { return nil })
	if prime.Annotations["volume.kubernetes.io/selected-node"] != "node-a" || *prime.Spec.StorageClassName != "pop-fast" ||
		*prime.Spec.VolumeMode != corev1.PersistentVolumeBlock || prime.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Fatalf("the prime claim: %+v", prime)
	}

	pv := w.provision(t, prime)
	pod := w.wantFillPod(t, primeKey, prime.Name)
	pod = w.failOnce(t, pvc, pod, primeKey)

	// The second succeeds: the volume is the claim's.
	pod.Status.Phase = corev1.PodSucceeded
	if err := w.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, w.c, client.ObjectKey{Name: pv.Name}, &corev1.PersistentVolume{}, func(pv *corev1.PersistentVolume) error {
		if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace {
			return fmt.Errorf("the volume's claimRef is %+v", pv.Spec.ClaimRef)
		}
		return nil
	})
	w.wantEvent(t, pvc, "Populated", "holds VolumeImage debian")
	// The prime claim goes once nothing uses it: the API server's
	// protection finalizer holds it until a controller manager, which
	// this test has none of, sees that.
	testenv.Eventually(t, timeout, func() error {
		for _, o := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.Pod{}, &corev1.Secret{}} {
			if err := w.c.Get(ctx, primeKey, o); !apierrors.IsNotFound(err) && (err != nil || o.GetDeletionTimestamp() == nil) {
				return fmt.Errorf("%T %s is still there (%v)", o, primeKey, err)
			}
		}
		return nil
	})
}

// provision plays the CSI driver: a volume bound to the prime claim.
func (w *world) provision(t *testing.T, prime *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	pv, err := w.bind(prime)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// bind makes a volume for the prime claim and binds the claim to it, as
// the external provisioner does; the populator may change the claim
// meanwhile, so a conflict is tried again on the claim's latest version.
func (w *world) bind(prime *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + prime.Name}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: prime.Spec.AccessModes,
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: storagev1alpha1.CSIDriver, VolumeHandle: "pop-fast|vm"}},
		ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: prime.Namespace, Name: prime.Name, UID: prime.UID},
		StorageClassName:       "pop-fast", VolumeMode: prime.Spec.VolumeMode}}
	ctx := context.Background()
	if err := w.c.Create(ctx, pv); err != nil {
		return nil, err
	}
	return pv, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(prime), prime); err != nil {
			return err
		}
		prime.Spec.VolumeName = pv.Name
		return w.c.Update(ctx, prime)
	})
}

// wantFillPod waits for the fill pod and checks what it runs on what.
func (w *world) wantFillPod(t *testing.T, key client.ObjectKey, prime string) *corev1.Pod {
	t.Helper()
	pod := eventually(t, w.c, key, &corev1.Pod{}, func(*corev1.Pod) error { return nil })
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "image fill --image-url http://minio.lan:9000/images/debian.qcow2 --type qcow2 --target /dev/strata-target") ||
		!strings.Contains(args, "--sha256 "+strings.Repeat("ab", 32)) || len(pod.Spec.Containers[0].VolumeDevices) != 1 ||
		pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != prime || len(pod.Spec.Containers[0].Env) != 2 {
		t.Fatalf("the fill pod: %+v", pod.Spec)
	}
	secret := &corev1.Secret{}
	if err := w.c.Get(context.Background(), key, secret); err != nil || string(secret.Data["accessKey"]) != "access" {
		t.Fatalf("the copied credentials: %v %v", secret.Data, err)
	}
	return pod
}

// mismatch is the error a fill pod ends with when the image's bytes are
// not the ones its digest names.
var mismatch = &cache.MismatchError{Want: cache.Digest("sha256:ab"), Got: cache.Digest("sha256:cd")}

// failOnce plays a failed fill: the reason is told on the claim, and the
// next try's pod is returned.
func (w *world) failOnce(t *testing.T, pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod, key client.ObjectKey) *corev1.Pod {
	t.Helper()
	firstUID := pod.UID
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "fill",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: mismatch.Error()}}}}}
	if err := w.c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// A digest mismatch has a reason of its own, for Alerts.
	w.wantEvent(t, pvc, imagepopulator.ReasonImageDigestMismatch, "the downloaded image is sha256:cd")
	// And on the VolumeImage, a kind an Alert's event sources may name.
	img := &storagev1alpha1.VolumeImage{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: pvc.Namespace, Name: pvc.Spec.DataSourceRef.Name}, img); err != nil {
		t.Fatal(err)
	}
	w.wantEvent(t, img, imagepopulator.ReasonImageDigestMismatch, "claim "+pvc.Namespace+"/"+pvc.Name)
	return eventually(t, w.c, key, &corev1.Pod{}, func(p *corev1.Pod) error {
		if p.UID == firstUID {
			return fmt.Errorf("the failed pod is still there")
		}
		return nil
	})
}

// Claims strata does not provision, and claims with no image, are left
// alone.
func TestOtherClaimsAreLeftAlone(t *testing.T) {
	w := newWorld(t)
	other := w.claim("elsewhere", "pop-other")
	other.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	plain := w.claim("plain", "pop-fast")
	plain.Spec.DataSourceRef, plain.Annotations = nil, other.Annotations
	w.create(t, other, plain)
	marker := w.claim("marker", "pop-fast")
	marker.Annotations = other.Annotations
	w.create(t, marker)
	// The marker's prime claim shows the populator has looked at the
	// claims made before it.
	eventually(t, w.c, client.ObjectKey{Namespace: w.system, Name: "populate-" + string(marker.UID)}, &corev1.PersistentVolumeClaim{},
		func(*corev1.PersistentVolumeClaim) error { return nil })
	primes := &corev1.PersistentVolumeClaimList{}
	if err := w.c.List(context.Background(), primes, client.InNamespace(w.system)); err != nil {
		t.Fatal(err)
	}
	for _, p := range primes.Items {
		if p.Name == "populate-"+string(other.UID) || p.Name == "populate-"+string(plain.UID) {
			t.Errorf("a prime claim %s for a claim the populator does not fill", p.Name)
		}
	}
}

// wantEvent waits for an event on the claim with the reason, saying says.
func (w *world) wantEvent(t *testing.T, obj client.Object, reason, says string) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		list := &corev1.EventList{}
		if err := w.c.List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		if slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.UID == obj.GetUID() && e.Reason == reason && strings.Contains(e.Message, says)
		}) {
			return nil
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.UID == obj.GetUID() {
				seen = append(seen, e.Reason+": "+e.Message)
			}
		}
		return fmt.Errorf("no %s event on %s saying %q yet; its events: %q", reason, obj.GetName(), says, seen)
	})
}

// A failed fill waits before the next, longer after each failure, and
// the wait is kept on the API server: the failed pod's deletion wakes
// the claim at once, and must not start the next fill at once.
func TestFailedFillsBackOff(t *testing.T) {
	w := newWorldRetrying(t, time.Second)
	ctx := context.Background()
	pvc := w.claim("backoff", "pop-fast")
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	w.create(t, pvc)
	primeKey := client.ObjectKey{Namespace: w.system, Name: "populate-" + string(pvc.UID)}
	prime := eventually(t, w.c, primeKey, &corev1.PersistentVolumeClaim{}, func(*corev1.PersistentVolumeClaim) error { return nil })
	w.provision(t, prime)
	pod := w.wantFillPod(t, primeKey, prime.Name)
	for _, c := range []struct {
		failures string
		wait     time.Duration
	}{{"1", time.Second}, {"2", 2 * time.Second}} {
		firstUID := pod.UID
		pod.Status = corev1.PodStatus{Phase: corev1.PodFailed}
		failedAt := time.Now()
		if err := w.c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if c.failures == "1" { // later ones join the first's event series, which keeps its message
			w.wantEvent(t, pvc, "PopulateFailed", "failed (try 1), tried again in 1s")
		}
		prime = eventually(t, w.c, primeKey, &corev1.PersistentVolumeClaim{}, func(p *corev1.PersistentVolumeClaim) error {
			if p.Annotations["populator.strata.dev/failures"] != c.failures {
				return fmt.Errorf("the prime claim's annotations: %v", p.Annotations)
			}
			return nil
		})
		retryAt, err := time.Parse(time.RFC3339Nano, prime.Annotations["populator.strata.dev/retry-at"])
		if err != nil || retryAt.Sub(failedAt) < c.wait {
			t.Fatalf("after failure %s the next fill may start at %v (%v), not %s after the failure", c.failures, retryAt, err, c.wait)
		}
		pod = eventually(t, w.c, primeKey, &corev1.Pod{}, func(p *corev1.Pod) error {
			if p.UID == firstUID {
				return fmt.Errorf("the failed pod is still there")
			}
			return nil
		})
		if seen := time.Now(); seen.Before(retryAt) {
			t.Fatalf("after failure %s the next fill started %s before its retry time", c.failures, retryAt.Sub(seen))
		}
	}
}

// No fill starts for a claim being deleted, and what was made for it
// goes.
func TestAClaimBeingDeletedStartsNoFill(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pvc := w.claim("going", "pop-fast")
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	pvc.Finalizers = []string{"test.strata.dev/keep"} // as kubernetes.io/pvc-protection keeps a claim in use
	w.create(t, pvc)
	t.Cleanup(func() {
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Finalizers = nil
		_ = w.c.Patch(context.Background(), pvc, patch)
	})
	primeKey := client.ObjectKey{Namespace: w.system, Name: "populate-" + string(pvc.UID)}
	prime := eventually(t, w.c, primeKey, &corev1.PersistentVolumeClaim{}, func(*corev1.PersistentVolumeClaim) error { return nil })
	if err := w.c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	// Bound after the claim began to go, a fill would start now. The
	// populator may already have removed the prime claim, which is the
	// outcome this test wants.
	if _, err := w.bind(prime); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, func() error {
		p := &corev1.PersistentVolumeClaim{}
		if err := w.c.Get(ctx, primeKey, p); !apierrors.IsNotFound(err) && (err != nil || p.DeletionTimestamp == nil) {
			return fmt.Errorf("the prime claim of a claim being deleted is still there (%v)", err)
		}
		return nil
	})
	if err := w.c.Get(ctx, primeKey, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a fill pod for a claim being deleted: %v", err)
	}
}

// A VolumeImage is a tenant's: one naming an endpoint off the
// controller's list (an address inside the cluster, say) is refused on
// the claim before a prime claim, a volume or a pod is made, so no node
// ever requests it; the pods of allowed ones get the same list.
func TestAVolumeImageOffTheEndpointListIsNeverFetched(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	img := &storagev1alpha1.VolumeImage{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "metadata"},
		Spec: storagev1alpha1.VolumeImageSpec{URL: "http://169.254.169.254/latest/meta-data", Format: "raw"}}
	w.create(t, img)
	pvc := w.claim("probe", "pop-fast")
	pvc.Spec.DataSourceRef.Name = img.Name
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	w.create(t, pvc)
	w.wantEvent(t, pvc, "PopulateRefused", "the endpoint http://169.254.169.254 is not one this node may fetch images from")
	primeKey := client.ObjectKey{Namespace: w.system, Name: "populate-" + string(pvc.UID)}
	for _, o := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.Pod{}} {
		if err := w.c.Get(ctx, primeKey, o); !apierrors.IsNotFound(err) {
			t.Fatalf("%T %s made for a refused VolumeImage: %v", o, primeKey, err)
		}
	}

	allowed := w.claim("allowed", "pop-fast")
	allowed.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	w.create(t, allowed)
	key := client.ObjectKey{Namespace: w.system, Name: "populate-" + string(allowed.UID)}
	prime := eventually(t, w.c, key, &corev1.PersistentVolumeClaim{}, func(*corev1.PersistentVolumeClaim) error { return nil })
	w.provision(t, prime)
	pod := w.wantFillPod(t, key, prime.Name)
	if args := strings.Join(pod.Spec.Containers[0].Args, " "); !strings.Contains(args, "--endpoints http://minio.lan:9000") {
		t.Fatalf("the fill pod's arguments %q do not hold the controller's endpoints", args)
	}
}
