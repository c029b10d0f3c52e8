package whenused

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// Nothing starts while the cluster holds no object of the kinds; the
// first one created starts it.
func TestStartsWithTheFirstObject(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informers, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	used, err := watch(ctx, informers, []client.Object{&failoverv1alpha1.Failover{}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-used:
		t.Fatal("the feature counts as used though the cluster holds no Failover")
	default:
	}
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: "default"},
		Spec: failoverv1alpha1.FailoverSpec{Workload: failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "app"},
			Primary: failoverv1alpha1.Side{Node: "a", Claim: "data-a"}, Backup: failoverv1alpha1.Side{Node: "b", Claim: "data-b"},
			Replication: failoverv1alpha1.ReplicationReference{Source: "data", Destination: "data"}}}
	if err := env.Client.Create(ctx, fo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), fo) })
	select {
	case <-used:
	case <-time.After(30 * time.Second):
		t.Fatal("the first Failover did not count as a use within 30 s")
	}
}
