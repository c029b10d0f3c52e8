package csi_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/mount-utils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/csienv"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/decrypt"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// render builds one path of clusters/homelab with the engine's build,
// decrypting its SOPS files with the example's age key as its
// Kustomizations do (spec.decryption, the key strata up installs).
func render(t *testing.T, path string, vars map[string]string) []*unstructured.Unstructured {
	t.Helper()
	ks := &kustomizev1.Kustomization{}
	ks.Name, ks.Namespace = "homelab", "flux-system"
	ks.Spec.Path = path
	ks.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: vars}
	ks.Spec.Decryption = &kustomizev1.Decryption{Provider: "sops", SecretRef: &meta.LocalObjectReference{Name: "sops-age"}}
	key, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "homelab-sops.agekey"))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decrypt.FromSecret("flux-system/sops-age", map[string][]byte{"homelab.agekey": key})
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := build.RenderDecrypting(context.Background(), filepath.Join(testenv.RepoRoot(), "clusters", "homelab"), ks, nil, dec)
	if err != nil {
		t.Fatal(err)
	}
	return rendered.Objects
}

func find[T any](t *testing.T, objects []*unstructured.Unstructured, kind, name string, into *T) *T {
	t.Helper()
	for _, o := range objects {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Fatal(err)
			}
			return into
		}
	}
	t.Fatalf("clusters/homelab has no %s %s", kind, name)
	return nil
}

// The btrfs StorageClass and the claim in clusters/homelab, rendered as
// the engine renders them, give a volume the agent serves: provisioned
// through CSI as the provisioner sidecar would, exported through
// NFS-Ganesha on publish, and a file written through the pod's mount
// reads back through NFS.
func TestHomelabBtrfsClaimIsServedOverNFS(t *testing.T) {
	testenv.NeedTools(t, "nfs-cat")
	ctx := context.Background()
	e := startBtrfs(t, "homelab-btrfs")
	agentURL, token := e.BtrfsAgent()
	storage := render(t, "./infrastructure/storage", map[string]string{"btrfs_agent_url": agentURL, "btrfs_nfs_server": "127.0.0.1"})
	apps := render(t, "./apps", map[string]string{"cluster_name": "homelab", "notes_size": "1Gi"})
	sc := find(t, storage, "StorageClass", "strata-btrfs", &storagev1.StorageClass{})
	// The test's agent speaks plain HTTP, so there is no CA to trust.
	delete(sc.Parameters, rules.AgentCASecretParameter)
	pvc := find(t, apps, "PersistentVolumeClaim", "media-library", &corev1.PersistentVolumeClaim{})

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sc.Parameters["csi.storage.k8s.io/provisioner-secret-name"],
		Namespace: sc.Parameters["csi.storage.k8s.io/provisioner-secret-namespace"]}, StringData: map[string]string{"token": token}}
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secret.Namespace}}, secret, sc} {
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	t.Cleanup(func() { _ = e.Client.Delete(ctx, sc) })

	conn, err := csienv.Dial(e.ControllerEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	controller := csi.NewControllerClient(conn)
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	rwx := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}
	if pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Fatalf("the homelab claim is %v, want ReadWriteMany", pvc.Spec.AccessModes)
	}
	secrets := map[string]string{"token": token}
	created, err := controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-media-library", Parameters: sc.Parameters,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size.Value()}, VolumeCapabilities: []*csi.VolumeCapability{rwx}, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()
	if id != "strata-btrfs|pvc-media-library" || created.GetVolume().GetCapacityBytes() != size.Value() {
		t.Fatalf("CreateVolume = %v, want strata-btrfs|pvc-media-library of %d bytes", created.GetVolume(), size.Value())
	}
	agent := &volumeapi.Client{URL: agentURL, Token: token}
	if v, err := agent.GetVolume(ctx, "pvc-media-library"); err != nil || v.Compression != "zstd" || v.CompressionLevel != 3 {
		t.Fatalf("the agent's volume = %+v, %v; want the class's zstd:3", v, err)
	}

	// ControllerPublish to another node exports it; the publish context
	// says where from.
	publish := func(node string) map[string]string {
		t.Helper()
		published, err := controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id,
			NodeId: node, VolumeCapability: rwx, Secrets: secrets, VolumeContext: created.GetVolume().GetVolumeContext()})
		if err != nil {
			t.Fatal(err)
		}
		return published.GetPublishContext()
	}
	pc := publish("homelab-client|127.0.0.1")
	if pc["exportPath"] != "/sanity/pvc-media-library" || pc["nfsServer"] != "127.0.0.1" {
		t.Fatalf("publish context %v", pc)
	}
	// To the storage host itself, nothing more is exported: it
	// bind-mounts the volume.
	onHost := publish("homelab-btrfs-node|127.0.0.1")
	wantHostPublish(t, agent, onHost)

	// The pod's mount, on the storage host itself: a bind mount.
	target := mountOnNode(t, e, id, rwx, onHost, created.GetVolume().GetVolumeContext())
	if err := os.WriteFile(filepath.Join(target, "song.txt"), []byte("la la la"), 0o644); err != nil {
		t.Fatal(err)
	}

	_, port, _ := net.SplitHostPort(e.NFSAddr())
	url := fmt.Sprintf("nfs://%s%s/song.txt?version=4&nfsport=%s", pc["nfsServer"], pc["exportPath"], port)
	testenv.Eventually(t, 20*time.Second, func() error {
		out, err := exec.Command("nfs-cat", url).CombinedOutput()
		if err != nil || string(out) != "la la la" {
			return fmt.Errorf("nfs-cat %s: %q, %v", url, out, err)
		}
		return nil
	})
}

// wantHostPublish checks a publish to the storage host: its path and
// node, and no export beside the other node's.
func wantHostPublish(t *testing.T, agent *volumeapi.Client, pc map[string]string) {
	t.Helper()
	v, err := agent.GetVolume(context.Background(), "pvc-media-library")
	if err != nil || len(v.Clients) != 1 || pc["node"] != "homelab-btrfs-node" || pc["path"] == "" {
		t.Fatalf("published to its host: context %v, volume %+v (%v); want the client's export alone and the host's path", pc, v, err)
	}
}

// mountOnNode stages and publishes a volume through the node service as
// kubelet would, and undoes both when the test ends.
func mountOnNode(t *testing.T, e *csienv.Env, id string, capability *csi.VolumeCapability, pc, volumeContext map[string]string) string {
	t.Helper()
	ctx := context.Background()
	nodeConn, err := csienv.Dial(e.NodeEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodeConn.Close() })
	node := csi.NewNodeClient(nodeConn)
	staging, target := filepath.Join(t.TempDir(), "staging"), filepath.Join(t.TempDir(), "target")
	if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability,
		PublishContext: pc, VolumeContext: volumeContext}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	})
	// kubelet unstages only a mount no other shares its root with, and
	// the storage host's NFS server has the data subvolume bind-mounted
	// onto itself.
	if refs, err := mount.New("").GetMountRefs(staging); err != nil || len(refs) > 0 {
		t.Fatalf("the staging mount shares its root with %v (%v): kubelet would never unstage it", refs, err)
	}
	if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, PublishContext: pc, VolumeContext: volumeContext}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	})
	return target
}

// TestBtrfsVolumeWithSnapshotsIsKept checks DeleteVolume of a btrfs
// volume: refused while a snapshot exists, with volume and snapshot left
// as they were; once the snapshot is gone, the volume goes with the
// export a node never took back.
func TestBtrfsVolumeWithSnapshotsIsKept(t *testing.T) {
	ctx := context.Background()
	e := startBtrfs(t, "keep-btrfs")
	conn, err := csienv.Dial(e.ControllerEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := csi.NewControllerClient(conn)
	params, secrets, _ := e.BtrfsClass()
	created, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-kept", Parameters: params, Secrets: secrets,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20}, VolumeCapabilities: []*csi.VolumeCapability{rwxCapability}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()
	if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "keep-btrfs-node|127.0.0.1",
		VolumeCapability: rwxCapability, Secrets: secrets, VolumeContext: created.GetVolume().GetVolumeContext()}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-kept", SourceVolumeId: id, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: secrets})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("DeleteVolume of a volume with a snapshot: %v, want FailedPrecondition", err)
	}
	url, token := e.BtrfsAgent()
	agent := &volumeapi.Client{URL: url, Token: token}
	if _, err := agent.GetVolume(ctx, "pvc-kept"); err != nil {
		t.Fatalf("the refused delete took the volume: %v", err)
	}
	if _, err := agent.GetSnapshot(ctx, "snap-kept"); err != nil {
		t.Fatalf("the refused delete took the snapshot: %v", err)
	}
	if _, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId(), Secrets: secrets}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: secrets}); err != nil {
		t.Fatalf("DeleteVolume once its snapshot is gone: %v", err)
	}
	if _, err := agent.GetVolume(ctx, "pvc-kept"); volumeapi.StatusOf(err) != 404 {
		t.Fatalf("the volume is still there after DeleteVolume: %v", err)
	}
}
