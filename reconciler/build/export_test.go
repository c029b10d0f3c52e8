package build

import kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"

// LoadsOwnSchema is loadsOwnSchema on what rendering ks in root reads.
func LoadsOwnSchema(ks *kustomizev1.Kustomization, root string) bool {
	return loadsOwnSchema(readsOf(ks, root))
}

// ReadsOnlyItsPath is what Rendered.SelfContained would say of rendering
// ks in root, without rendering.
func ReadsOnlyItsPath(ks *kustomizev1.Kustomization, root string) bool {
	r, ok := readsOf(ks, root)
	return selfContained(ks, root, r, ok)
}
