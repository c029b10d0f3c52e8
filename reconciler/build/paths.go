package build

import (
	"bytes"
	"os"
	"path/filepath"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"sigs.k8s.io/kustomize/api/konfig"
)

// ReadsOnlyItsPath is true when rendering ks reads only files under its
// spec.path in root: no components, no values from the cluster, and a
// kustomization file (if any) with no parent or remote references. Such a
// render cannot change while no file under the path changes.
func ReadsOnlyItsPath(ks *kustomizev1.Kustomization, root string) bool {
	if len(ks.Spec.Components) > 0 || (ks.Spec.PostBuild != nil && len(ks.Spec.PostBuild.SubstituteFrom) > 0) {
		return false
	}
	dir := filepath.Join(root, filepath.Clean("/"+ks.Spec.Path))
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && (bytes.Contains(data, []byte("..")) || bytes.Contains(data, []byte("://"))) {
			return false
		}
	}
	return true
}
