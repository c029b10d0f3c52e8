package build

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
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

// loadsOwnSchema reports whether rendering ks may load a schema of its
// own: a kustomization file it reads declares `openapi:`. Only what the
// render reads is looked at; scanning the whole source took 17-26 ms for
// a thousand directories, paid by the first render of every revision, the
// one a push waits for. When what the render reads cannot be followed (a
// remote base, a file that does not parse), the whole source is scanned.
func loadsOwnSchema(ks *kustomizev1.Kustomization, root string) bool {
	r, ok := readsOf(ks, root)
	if !ok {
		return sourceDeclaresSchema(root)
	}
	return r.ownSchema || slices.ContainsFunc(r.plain, declaresSchemaUnder)
}

var schemaInSource sync.Map // source root -> bool

// sourceDeclaresSchema is declaresSchemaUnder for a whole source tree,
// which is immutable per revision, so the answer is cached by root.
func sourceDeclaresSchema(root string) bool {
	if v, ok := schemaInSource.Load(root); ok {
		return v.(bool)
	}
	found := declaresSchemaUnder(root)
	schemaInSource.Store(root, found)
	return found
}

// declaresSchemaUnder reports whether a kustomization file in dir or below
// it mentions `openapi:`.
func declaresSchemaUnder(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
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
	return found
}
