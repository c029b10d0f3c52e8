package kustomization

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The controller is made without controller-runtime's For, which would
// name the Kustomization in every log line; the log queries users wrote
// for Flux's kustomize-controller must still find a reconcile's lines.
func TestReconcileLogLinesNameTheKustomization(t *testing.T) {
	var line string
	base := funcr.NewJSON(func(obj string) { line = obj }, funcr.Options{})
	logFor := requestLogger(base)

	logFor(&reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "apps", Name: "web"}}).Info("reconciled")
	for _, want := range []string{
		`"controller":"kustomization"`, `"controllerGroup":"kustomize.toolkit.fluxcd.io"`,
		`"controllerKind":"Kustomization"`, `"Kustomization":{"name":"web","namespace":"apps"}`,
		`"namespace":"apps"`, `"name":"web"`,
	} {
		if !strings.Contains(line, want) {
			t.Errorf("a reconcile's log line lacks %s: %s", want, line)
		}
	}

	logFor(nil).Info("starting")
	if !strings.Contains(line, `"controller":"kustomization"`) || strings.Contains(line, `"namespace"`) {
		t.Errorf("the controller's own log line: %s", line)
	}
}
