package risk

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/strata-gitops/strata/internal/scheme"
)

func volumeImage(url string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "storage.strata.dev/v1alpha1", "kind": "VolumeImage",
		"metadata": map[string]any{"name": "debian", "namespace": "vms"}, "spec": map[string]any{"url": url, "format": "qcow2"}}}
}

func claimOf(name, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": name, "namespace": "vms"},
		"spec":     map[string]any{"dataSourceRef": map[string]any{"apiGroup": "storage.strata.dev", "kind": "VolumeImage", "name": image}}}}
}

// A changed VolumeImage is shown as what it does: later claims get the
// new image, and the claims filled from it keep their data.
func TestAChangedImageRefillsNoClaim(t *testing.T) {
	head := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(claimOf("vm-2", "debian"), claimOf("vm-1", "debian"), claimOf("other", "ubuntu")).Build()
	b, h := volumeImage("http://minio/images/debian-12.1.qcow2"), volumeImage("http://minio/images/debian-12.2.qcow2")
	risk, reasons := Classify(context.Background(), Strata, head, head, nil, b, h)
	want := "the image changes from http://minio/images/debian-12.1.qcow2 to http://minio/images/debian-12.2.qcow2: only claims made from now on are filled with it; claims vm-1, vm-2 keep the data they were filled with"
	if risk != Safe || len(reasons) != 1 || !strings.HasPrefix(reasons[0], want) {
		t.Fatalf("classify = %s %q; want Safe saying %q", risk, reasons, want)
	}
	if risk, reasons := Classify(context.Background(), Strata, head, head, nil, b, b.DeepCopy()); risk != Safe || len(reasons) != 0 {
		t.Errorf("an unchanged image: %s %q", risk, reasons)
	}
}
