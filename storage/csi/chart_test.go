package csi_test

import (
	"context"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/csienv"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/csisecrets"
)

// TestChartServiceAccountsRunTheDriver runs the agent and the CSI
// controller as the service accounts of the Helm chart, with the chart's
// RBAC and nothing more, through a volume's whole life on both backends:
// a permission the chart lacks fails a call here.
func TestChartServiceAccountsRunTheDriver(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	const ns = "chart-rbac"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var rbac []*unstructured.Unstructured
	for _, o := range testenv.RenderChart(t, "rbac", ns, "image.repository=images.example/strata", "csiSidecars.registry=images.example") {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, o)
		}
	}
	if err := testenv.ApplyStrictly(ctx, env.Client, rbac); err != nil {
		t.Fatal(err)
	}
	agent := testenv.ServiceAccountConfig(env.Config, ns, "rbac-agent")
	controller := testenv.ServiceAccountConfig(env.Config, ns, "rbac-csi-controller")
	asChart := func(o *csienv.Options) { o.AgentConfig, o.ControllerConfig = agent, controller }
	refused(t, agent) // RBAC is enforced: this test would catch a missing rule

	t.Run("lvm", func(t *testing.T) {
		s := connect(t, startCSI(t, "chart-lvm", asChart))
		s.capability = mountCapability("xfs")
		lifecycle(t, s, "chart")
	})
	t.Run("btrfs", func(t *testing.T) {
		// The chart's controller grants the CSI controller the Secrets its
		// classes name (csi.secretAccess: classes, the default).
		testenv.RunManager(t, env, func(mgr manager.Manager) error {
			return (&csisecrets.Reconciler{Client: mgr.GetClient(), Account: client.ObjectKey{Namespace: ns, Name: "rbac-csi-controller"},
				Name: "rbac-csi-controller-secrets"}).SetupWithManager(mgr)
		})
		e := startBtrfs(t, "chart-btrfs", asChart)
		conn, err := csienv.Dial(e.ControllerEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c := csi.NewControllerClient(conn)
		params, _, _ := e.BtrfsClass()
		params["csi.storage.k8s.io/provisioner-secret-name"] = "chart-btrfs"
		params["csi.storage.k8s.io/provisioner-secret-namespace"] = "chart-btrfs-node"
		// No secrets in the calls: the controller reads the class and its
		// Secret, once the grant of it has landed.
		var created *csi.CreateVolumeResponse
		testenv.Eventually(t, 30*time.Second, func() error {
			var err error
			created, err = c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-chart", Parameters: params,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20}, VolumeCapabilities: []*csi.VolumeCapability{rwxCapability}})
			return err
		})
		id := created.GetVolume().GetVolumeId()
		if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "chart-btrfs-node|127.0.0.1",
			VolumeCapability: rwxCapability, VolumeContext: created.GetVolume().GetVolumeContext()}); err != nil {
			t.Fatal(err)
		}
		if list, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{}); err != nil || len(list.GetEntries()) == 0 {
			t.Fatalf("ListVolumes = %v, %v", list, err)
		}
		if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "chart-btrfs-node|127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	})
}

var rwxCapability = &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}

// refused checks that the agent's account may not make LogicalVolumes,
// which the chart does not grant it.
func refused(t *testing.T, agent *rest.Config) {
	t.Helper()
	c, err := client.New(agent, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	lv := &storagev1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}}
	if err := c.Create(context.Background(), lv); !apierrors.IsForbidden(err) {
		t.Fatalf("the agent's service account created a LogicalVolume (%v): is RBAC enforced?", err)
	}
}
