package risk

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/reconciler/guard"
)

// failingReader answers every read with an error, as a cluster that
// cannot be reached would.
type failingReader struct{}

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("connection refused")
}

// A deletion the guard cannot judge is never reported Safe, even when the
// object carries the opt-in and the guard's check itself passes.
func TestAGuardThatCannotDecideIsNotSafe(t *testing.T) {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "apps", "annotations": map[string]any{guard.OptInAnnotation: "true"}}}}
	risk, reasons := OfDeletion(context.Background(), Strata, failingReader{}, nil, ns, "removed from Git")
	if risk != Blocked || !strings.Contains(strings.Join(reasons, "; "), "could not decide") {
		t.Fatalf("OfDeletion = %s %q, want Blocked saying the guard could not decide", risk, reasons)
	}
}
