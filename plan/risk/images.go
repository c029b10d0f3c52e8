package risk

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// volumeImageKind is the kind claims are filled from (docs/images.md).
var volumeImageKind = schema.GroupKind{Group: storagev1alpha1.GroupVersion.Group, Kind: storagev1alpha1.VolumeImageKind}

// imageChange: a VolumeImage's new image fills the claims made from now
// on; a claim filled already keeps its data, and is refilled only by
// deleting and making it again, which the data-loss guard judges.
func imageChange(headObjs client.Reader, b, h *unstructured.Unstructured) []finding {
	if fieldEqual(b, h, "spec") {
		return nil
	}
	what := "the image changes"
	if bu, hu := specString(b, "url"), specString(h, "url"); bu != hu {
		what = fmt.Sprintf("the image changes from %s to %s", bu, hu)
	}
	users := claimsFilledFrom(headObjs, h.GetNamespace(), h.GetName())
	reason := what + ": only claims made from now on are filled with it"
	if len(users) > 0 {
		reason += fmt.Sprintf("; claims %s keep the data they were filled with (to refill one, delete it and make it again, which the data-loss guard judges)",
			strings.Join(users, ", "))
	}
	return []finding{{Safe, reason}}
}

func specString(o *unstructured.Unstructured, field string) string {
	s, _, _ := unstructured.NestedString(o.Object, "spec", field)
	return s
}

// claimsFilledFrom names the revision's claims in ns whose
// dataSourceRef is the VolumeImage name.
func claimsFilledFrom(objs client.Reader, ns, name string) []string {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaimList"})
	if err := objs.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var names []string
	for _, pvc := range list.Items {
		ref, _, _ := unstructured.NestedStringMap(pvc.Object, "spec", "dataSourceRef")
		if ref["apiGroup"] == volumeImageKind.Group && ref["kind"] == volumeImageKind.Kind && ref["name"] == name {
			names = append(names, pvc.GetName())
		}
	}
	sort.Strings(names)
	return names
}
