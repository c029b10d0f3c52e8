package risk

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/reconciler/guard"
	"github.com/strata-gitops/strata/rules"
)

// buildbarnStorageKind is the kind whose shards hold Buildbarn's cache
// (docs/buildbarn.md).
var buildbarnStorageKind = schema.GroupKind{Group: bbv1.GroupVersion.Group, Kind: "BuildbarnStorage"}

// buildbarnStorageChange says what a changed BuildbarnStorage does to
// its shards: how many blobs a new shard count moves, claims that grow
// in place, and claims that need making again, which its controller
// does only under the opt-in (and otherwise refuses, keeping them).
func buildbarnStorageChange(b, h *unstructured.Unstructured) []finding {
	before, after, err := decodeStorage(b, h)
	if err != nil {
		return []finding{{Blocked, fmt.Sprintf("BuildbarnStorage cannot be read: %v", err)}}
	}
	optIn := guard.OptedIn(h)
	found := reshard(shards(before), shards(after), optIn)
	bs, hs := rules.BuildbarnStoreSizes(&before.Spec.StorageExtras), rules.BuildbarnStoreSizes(&after.Spec.StorageExtras)
	for _, st := range []struct {
		name     string
		from, to config.StoreSize
	}{{"cas", bs.CAS, hs.CAS}, {"ac", bs.AC, hs.AC}, {"fsac", bs.FSAC, hs.FSAC}} {
		from, to := gib(st.from.ClaimBytes()), gib(st.to.ClaimBytes())
		switch {
		case to.Cmp(from) > 0:
			found = append(found, finding{Safe, fmt.Sprintf("%s claims grow online from %s to %s", st.name, from.String(), to.String())})
		case to.Cmp(from) < 0 && optIn:
			found = append(found, finding{DestroysData, fmt.Sprintf("%s claims shrink from %s to %s: every shard's %s claim is deleted and made again, empty", st.name, from.String(), to.String(), st.name)})
		case to.Cmp(from) < 0:
			found = append(found, finding{Blocked, fmt.Sprintf("%s claims would shrink from %s to %s, which needs new claims: the controller refuses and keeps them (BuildbarnStorage turns Degraded) unless it carries %s: \"true\"",
				st.name, from.String(), to.String(), guard.OptInAnnotation)})
		}
	}
	if class(before) != class(after) {
		risk, what := Blocked, "the controller refuses and keeps them unless the object opts in"
		if optIn {
			risk, what = DestroysData, "every shard's claims are deleted and made again, empty"
		}
		found = append(found, finding{risk, fmt.Sprintf("the shards' StorageClass changes from %s to %s: %s", class(before), class(after), what)})
	}
	return found
}

// reshard: named shards with rendezvous hashing move only the blobs of
// added or removed shards. Removed shards keep their claims unless the
// object opts in.
func reshard(from, to int32, optIn bool) []finding {
	if from == to {
		return nil
	}
	moved := fmt.Sprintf("reshards: about %.0f%% of blobs move (%d to %d shards)", 100*config.ReshardFraction(from, to), from, to)
	switch {
	case to > from:
		return []finding{{Disruptive, moved + "; they are fetched or rebuilt again"}}
	case optIn:
		return []finding{{DestroysData, moved + fmt.Sprintf("; shards %d to %d go and their claims are deleted", to, from-1)}}
	}
	return []finding{{Disruptive, moved + fmt.Sprintf("; shards %d to %d go and their claims are kept", to, from-1)}}
}

func decodeStorage(b, h *unstructured.Unstructured) (*bbv1.BuildbarnStorage, *bbv1.BuildbarnStorage, error) {
	var before, after bbv1.BuildbarnStorage
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &before); err != nil {
		return nil, nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(h.Object, &after); err != nil {
		return nil, nil, err
	}
	return &before, &after, nil
}

func shards(s *bbv1.BuildbarnStorage) int32 {
	if s.Spec.Replicas == nil {
		return 1
	}
	return *s.Spec.Replicas
}

func class(s *bbv1.BuildbarnStorage) string {
	if c := strings.TrimSpace(s.Spec.StorageClassName); c != "" {
		return c
	}
	return rules.BuildbarnStorageClass
}

func gib(bytes int64) resource.Quantity { return *resource.NewQuantity(bytes, resource.BinarySI) }
