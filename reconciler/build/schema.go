package build

import (
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

// loadsOwnSchema reports whether rendering ks may load a schema of its
// own: a kustomization file it reads declares `openapi:`. Only what the
// render reads is looked at, parsed as kustomize parses it; scanning the
// whole source took 17-26 ms for a thousand directories, paid by the
// first render of every revision, the one a push waits for. A render whose
// inputs cannot be followed (a remote base, a file that does not parse)
// may load anything, and runs alone.
func loadsOwnSchema(r *reads, ok bool) bool {
	return !ok || r.ownSchema
}
