package risk

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/reconciler/guard"
)

func bbStorage(replicas int64, casBlocks string, optIn bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "buildbarn.strata.dev/v1alpha1", "kind": "BuildbarnStorage",
		"metadata": map[string]any{"name": "storage", "namespace": "buildbarn"},
		"spec":     map[string]any{"release": "r1", "replicas": replicas, "cas": map[string]any{"blocksSize": casBlocks}}}}
	if optIn {
		u.SetAnnotations(map[string]string{guard.OptInAnnotation: "true"})
	}
	return u
}

// A BuildbarnStorage change is shown as what happens to its shards.
func TestABuildbarnStorageChangeSaysWhatHappensToItsShards(t *testing.T) {
	head := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	for _, tc := range []struct {
		name string
		b, h *unstructured.Unstructured
		risk string
		says string
	}{
		{"a shard added", bbStorage(2, "1Gi", false), bbStorage(3, "1Gi", false), Disruptive, "reshards: about 33% of blobs move (2 to 3 shards)"},
		{"a shard removed", bbStorage(4, "1Gi", false), bbStorage(3, "1Gi", false), Disruptive, "reshards: about 25% of blobs move (4 to 3 shards); shards 3 to 3 go and their claims are kept"},
		{"a shard removed, opted in", bbStorage(4, "1Gi", false), bbStorage(2, "1Gi", true), DestroysData, "shards 2 to 3 go and their claims are deleted"},
		{"the CAS grown", bbStorage(2, "1Gi", false), bbStorage(2, "3Gi", false), Safe, "cas claims grow online from 2Gi to 4Gi"},
		{"the CAS shrunk", bbStorage(2, "3Gi", false), bbStorage(2, "1Gi", false), Blocked, "the controller refuses and keeps them"},
		{"the CAS shrunk, opted in", bbStorage(2, "3Gi", false), bbStorage(2, "1Gi", true), DestroysData, "every shard's cas claim is deleted and made again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			risk, reasons := Classify(context.Background(), Strata, head, head, nil, tc.b, tc.h)
			if risk != tc.risk || !strings.Contains(strings.Join(reasons, "; "), tc.says) {
				t.Fatalf("classify = %s %q; want %s saying %q", risk, reasons, tc.risk, tc.says)
			}
		})
	}
}
