package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/dashboard"
)

// The Buildbarn page shows an installation's components with their
// versions, a skew marked, its storage's shards with their claims, and
// each claim filled from an image with the stage of its fill.
func TestTheBuildbarnPageShowsSkewShardsAndFills(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.env.Client
	storage := &bbv1.BuildbarnStorage{}
	storage.Name, storage.Namespace = "storage", f.mine
	scheduler := &bbv1.BuildbarnScheduler{}
	scheduler.Name, scheduler.Namespace = "scheduler", f.mine
	frontend := &bbv1.BuildbarnFrontend{}
	frontend.Name, frontend.Namespace = "frontend", f.mine
	for _, s := range []struct {
		o       bbv1.Component
		version string
	}{{storage, "2025-06-01"}, {scheduler, "2025-06-01"}, {frontend, "2024-12-01"}} {
		o := s.o.(client.Object)
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		*s.o.GetStatus() = bbv1.ComponentStatus{State: bbv1.StateReady, Version: s.version, Replicas: 2, ReadyReplicas: 2}
		if err := c.Status().Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"cas-storage-0", "ac-storage-0", "cas-storage-1"} {
		claim := claimOf(f.mine, name, "strata-fast", "1Gi", "")
		claim.Labels = map[string]string{objects.ComponentLabel: "storage", objects.InstanceLabel: "storage"}
		if err := c.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	fill := claimOf(f.mine, "vm", "strata-fast", "10Gi", "debian-13")
	fill.Annotations = map[string]string{"volume.kubernetes.io/selected-node": f.nodeA}
	prime := claimOf(f.not, "prime-vm", "strata-fast", "10Gi", "")
	prime.Labels = map[string]string{storagev1alpha1.PopulatorClaimNamespaceLabel: f.mine, storagev1alpha1.PopulatorClaimNameLabel: "vm"}
	prime.Annotations = map[string]string{storagev1alpha1.PopulatorFailuresAnnotation: "2", storagev1alpha1.PopulatorRetryAtAnnotation: "2026-11-28T03:00:00Z"}
	for _, o := range []client.Object{fill, prime} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := f.serve(t, dashboard.Open{})
	_, body := get(t, srv.URL+"/buildbarn", "")
	for _, want := range []string{
		`data-installation="` + f.mine + `"`, `data-mark="version-skew"`, `data-component="BuildbarnFrontend/frontend" class="needs-person"`,
		`data-component="BuildbarnStorage/storage">`, `data-shard="storage-0"><td>storage 0</td><td>ac-storage-0, cas-storage-0</td>`,
		`data-shard="storage-1"`, `data-fill="` + f.mine + `/vm" class="needs-person"`, `data-stage="provisioning its volume"`,
		"2, next try at 2026-11-28T03:00:00Z",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Buildbarn page lacks %s", want)
		}
	}
	if strings.Contains(body, `data-component="BuildbarnScheduler/scheduler" class="needs-person"`) {
		t.Error("a component on the installation's release is marked")
	}
}
