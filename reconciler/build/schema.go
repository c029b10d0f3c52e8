package build

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/openapi"
)

// kustomize keeps the OpenAPI schema in a process-wide global. Builds that
// load their own schema (the `openapi:` field) must reset it and so run
// alone; every other build reads the built-in schema and runs in parallel.
// Flux serialises all builds instead.
var schemaLock sync.RWMutex

func lockSchema(exclusive bool) (unlock func()) {
	if !exclusive {
		schemaLock.RLock()
		return schemaLock.RUnlock
	}
	schemaLock.Lock()
	openapi.ResetOpenAPI()
	_ = openapi.Schema()
	return func() {
		openapi.ResetOpenAPI()
		_ = openapi.Schema()
		schemaLock.Unlock()
	}
}

var openAPIUse sync.Map // source root -> bool

// usesOpenAPI reports whether any kustomization file in the source tree
// declares a custom schema. The tree is immutable per revision, so the
// answer is cached by root.
func usesOpenAPI(root string) bool {
	if v, ok := openAPIUse.Load(root); ok {
		return v.(bool)
	}
	found := false
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || found || d.IsDir() {
			return nil
		}
		switch d.Name() {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
			if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, []byte("openapi:")) {
				found = true
			}
		}
		return nil
	})
	openAPIUse.Store(root, found)
	return found
}
