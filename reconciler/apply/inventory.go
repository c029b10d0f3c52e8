package apply

import (
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Inventory lists the applied objects in Flux's inventory format:
// id "<namespace>_<name>_<group>_<kind>", v the API version.
func Inventory(cs *ssa.ChangeSet) *kustomizev1.ResourceInventory {
	inv := &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{}}
	for _, e := range cs.Entries {
		inv.Entries = append(inv.Entries, kustomizev1.ResourceRef{ID: e.ObjMetadata.String(), Version: e.GroupVersion})
	}
	SortInventory(inv)
	return inv
}

// SortInventory orders the entries by ID, as Flux writes them.
func SortInventory(inv *kustomizev1.ResourceInventory) {
	sort.Slice(inv.Entries, func(i, j int) bool { return inv.Entries[i].ID < inv.Entries[j].ID })
}

// Objects turns inventory entries back into object references.
// Entries that cannot be parsed are skipped: they name nothing deletable.
func Objects(entries []kustomizev1.ResourceRef) []*unstructured.Unstructured {
	objects := make([]*unstructured.Unstructured, 0, len(entries))
	for _, e := range entries {
		m, err := object.ParseObjMetadata(e.ID)
		if err != nil {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(m.GroupKind.WithVersion(e.Version))
		u.SetNamespace(m.Namespace)
		u.SetName(m.Name)
		objects = append(objects, u)
	}
	return objects
}

// StaleEntries are in the old inventory but not the new one.
func StaleEntries(old, current *kustomizev1.ResourceInventory) []kustomizev1.ResourceRef {
	if old == nil {
		return nil
	}
	kept := map[string]bool{}
	for _, e := range current.Entries {
		kept[e.ID] = true
	}
	var stale []kustomizev1.ResourceRef
	for _, e := range old.Entries {
		if !kept[e.ID] {
			stale = append(stale, e)
		}
	}
	return stale
}

// ObjMetadata identifies an object by group, kind, namespace and name.
func ObjMetadata(o client.Object) object.ObjMetadata {
	return object.ObjMetadata{Namespace: o.GetNamespace(), Name: o.GetName(), GroupKind: o.GetObjectKind().GroupVersionKind().GroupKind()}
}
