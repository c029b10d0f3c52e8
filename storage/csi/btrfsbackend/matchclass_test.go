package btrfsbackend

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// laggingCache is an informer cache that has not yet seen anything.
type laggingCache struct{ client.Reader }

func (laggingCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestNewStorageClassIsFoundBeforeTheCacheHasIt: a StorageClass created
// with its claim, in one apply, can reach CreateVolume before the
// controller's informer; the controller then asks the API server.
func TestNewStorageClassIsFoundBeforeTheCacheHasIt(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	params := map[string]string{"agentURL": fmt.Sprintf("http://agent-%d.invalid", os.Getpid()), "tenant": "homelab"}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fresh-%d", os.Getpid())}, Provisioner: storagev1alpha1.CSIDriver, Parameters: params}
	if err := env.Client.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, sc) })
	b := New(env.Client, laggingCache{env.Client}, time.Minute)
	withSidecarKeys := map[string]string{"csi.storage.k8s.io/pv/name": "pvc-1"}
	for k, v := range params {
		withSidecarKeys[k] = v
	}
	found, err := b.matchClass(ctx, withSidecarKeys)
	if err != nil {
		t.Fatal(err)
	}
	if found.Name != sc.Name {
		t.Errorf("matched StorageClass %s, want %s", found.Name, sc.Name)
	}
}

// Two classes with the same parameters (one a copy with another binding
// mode, say) share their agent: capacity may be asked through either,
// while a volume needs to know which it is of.
func TestTwinClassesShareCapacityButNotVolumes(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	params := map[string]string{"agentURL": fmt.Sprintf("http://twin-%d.invalid", os.Getpid())}
	for _, name := range []string{"twin-a", "twin-b"} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, os.Getpid())}, Provisioner: storagev1alpha1.CSIDriver, Parameters: params}
		if err := env.Client.Create(ctx, sc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, sc) })
	}
	b := New(env.Client, env.Client, time.Minute)
	if found, err := b.classesFor(ctx, params); err != nil || len(found) != 2 {
		t.Fatalf("classesFor = %d classes, %v; want both twins", len(found), err)
	}
	if _, err := b.matchClass(ctx, params); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("matchClass of twins: %v, want InvalidArgument naming both", err)
	}
}

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
