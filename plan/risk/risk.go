// Package risk judges one object's change between two revisions, as
// strata plan reports it: the worst risk class that applies and every
// reason found, from immutable fields, deletions of what holds data,
// claims resized or moved, Buildbarn reshards and VM image sources. It
// reads the objects of both revisions, never a controller.
package risk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/reconciler/guard"
)

// Risk classes, worst first.
const (
	DestroysData = "destroys-data"
	Recreate     = "recreate"
	Disruptive   = "disruptive"
	Blocked      = "blocked"
	Safe         = "safe"
)

// RiskClasses lists the classes in the order reports show them.
var RiskClasses = []string{DestroysData, Recreate, Disruptive, Blocked, Safe}

// Engine is what applies the repository on the cluster, which decides
// what a deletion does: strata's engine keeps data its guard protects;
// Flux's deletes whatever it prunes.
type Engine string

// The engines a plan judges for (--engine).
const (
	Strata Engine = "strata"
	Flux   Engine = "flux"
)

// immutable lists, per kind, the spec fields the API server refuses to
// change: the apply fails, or with force the object is deleted and
// created again.
var immutable = map[schema.GroupKind][]string{
	{Kind: "PersistentVolumeClaim"}: {"spec.storageClassName", "spec.accessModes", "spec.volumeName", "spec.volumeMode",
		"spec.selector", "spec.dataSource", "spec.dataSourceRef"},
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                 {"provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"},
	{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshotClass"}: {"driver", "parameters", "deletionPolicy"},
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                    {"spec.attachRequired", "spec.podInfoOnMount", "spec.volumeLifecycleModes"},
	{Group: "apps", Kind: "StatefulSet"}:                            {"spec.volumeClaimTemplates", "spec.selector", "spec.serviceName", "spec.podManagementPolicy"},
	{Group: "apps", Kind: "Deployment"}:                             {"spec.selector"},
	{Group: "apps", Kind: "DaemonSet"}:                              {"spec.selector"},
	{Group: "apps", Kind: "ReplicaSet"}:                             {"spec.selector"},
	{Group: "batch", Kind: "Job"}:                                   {"spec.selector", "spec.template"},
	{Kind: "Service"}:                                               {"spec.clusterIP", "spec.clusterIPs"},
}

// persistentVolumeSources are the fields of a PV's spec that say where its
// data is; none may change.
var persistentVolumeSources = prefixed("spec.",
	"awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
	"gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk",
	"portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume")

func prefixed(prefix string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// Classify judges a changed object: the worst risk that applies, with
// every reason found.
func Classify(ctx context.Context, engine Engine, baseObjs client.Reader, headObjs client.Reader, ks *kustomizev1.Kustomization, b, h *unstructured.Unstructured) (string, []string) {
	var found []finding
	gk := h.GroupVersionKind().GroupKind()
	if fields := changedImmutable(gk, b, h); len(fields) > 0 {
		found = append(found, recreateFinding(ctx, engine, baseObjs, ks, b, h, fields))
	}
	switch gk {
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		found = append(found, claimResize(headObjs, b, h)...)
	case schema.GroupKind{Kind: "PersistentVolume"}:
		found = append(found, volumeChange(b, h)...)
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		found = append(found, claimsMoved(b, h)...)
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		found = append(found, claimsMoved(b, h)...)
		found = append(found, claimTemplatesTakeOver(b, h)...)
		found = append(found, retentionTurnsToDelete(b, h)...)
	case schema.GroupKind{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}:
		found = append(found, existingClaimsMoved(b, h)...)
	case volumeImageKind:
		return worst(imageChange(headObjs, b, h))
	case buildbarnStorageKind:
		found = append(found, buildbarnStorageChange(b, h)...)
	}
	if gk.Group == guard.StrataStorageGroup {
		found = append(found, storageChange(b, h)...)
	}
	return worst(found)
}

type finding struct {
	risk   string
	reason string
}

func worst(found []finding) (string, []string) {
	if len(found) == 0 {
		return Safe, nil
	}
	rank := map[string]int{}
	for i, r := range RiskClasses {
		rank[r] = i
	}
	sort.SliceStable(found, func(i, j int) bool { return rank[found[i].risk] < rank[found[j].risk] })
	reasons := make([]string, len(found))
	for i, f := range found {
		reasons[i] = f.reason
	}
	return found[0].risk, reasons
}

func changedImmutable(gk schema.GroupKind, b, h *unstructured.Unstructured) []string {
	fields := immutable[gk]
	if gk == (schema.GroupKind{Kind: "PersistentVolume"}) {
		fields = persistentVolumeSources
	}
	var changed []string
	for _, f := range fields {
		path := strings.Split(f, ".")
		bv, bok, _ := unstructured.NestedFieldNoCopy(b.Object, path...)
		hv, hok, _ := unstructured.NestedFieldNoCopy(h.Object, path...)
		// A field Git leaves out keeps its live value (the binder fills a
		// PVC's volumeName, the API server a Service's clusterIP).
		if bok && hok && !reflect.DeepEqual(bv, hv) || bok && !hok && gk.Kind == "PersistentVolume" {
			changed = append(changed, f)
		}
	}
	return changed
}

// recreateFinding: without force the apply fails; with force the engine
// deletes and recreates, which the guard treats as any other deletion.
func recreateFinding(ctx context.Context, engine Engine, baseObjs client.Reader, ks *kustomizev1.Kustomization, b, h *unstructured.Unstructured, fields []string) finding {
	what := fmt.Sprintf("%s cannot change (%s)", strings.Join(fields, ", "), h.GetKind())
	force := ks != nil && ks.Spec.Force || h.GetAnnotations()[kustomizev1.GroupVersion.Group+"/force"] == kustomizev1.EnabledValue
	if !force {
		return finding{Recreate, what + ": the apply will fail; set force (spec.force or the object's " +
			kustomizev1.GroupVersion.Group + "/force: enabled annotation) to delete and recreate it"}
	}
	risk, reasons := OfDeletion(ctx, engine, baseObjs, ks, b, "force is set and "+what)
	if risk == Safe {
		return finding{Recreate, what + ": force is set, so it is deleted and created again"}
	}
	return finding{risk, strings.Join(reasons, "; ")}
}

// OfDeletion judges deleting live (offline, the base object stands for it
// and the base revision for the cluster). Under strata's engine it is the
// guard's verdict: blocked without the opt-in, destroying data with it.
// Under Flux nothing keeps what holds data: its deletion destroys it.
func OfDeletion(ctx context.Context, engine Engine, baseObjs client.Reader, ks *kustomizev1.Kustomization, live *unstructured.Unstructured, cause string) (string, []string) {
	if engine == Flux {
		return ofFluxDeletion(ctx, baseObjs, live, cause)
	}
	var owner client.Object
	if ks != nil {
		owner = ks
	}
	err := guard.Check(ctx, baseObjs, live, owner)
	var blocked *guard.Blocked
	switch {
	case errors.As(err, &blocked):
		return Blocked, []string{fmt.Sprintf("%s; the data-loss guard keeps it: %s", cause, blocked.Reason)}
	case err != nil:
		return Blocked, []string{fmt.Sprintf("%s; the guard could not decide: %v", cause, err)}
	}
	reason, err := guard.Reason(ctx, baseObjs, live)
	if err != nil {
		return Blocked, []string{fmt.Sprintf("%s; the guard could not decide: %v", cause, err)}
	}
	if reason == "" {
		return Safe, []string{cause}
	}
	return DestroysData, []string{fmt.Sprintf("%s; %s and carries %s: \"true\"", cause, reason, guard.OptInAnnotation)}
}

// ofFluxDeletion: Flux deletes what it prunes; whatever holds data, by
// the guard's own reading of the object, goes with it.
func ofFluxDeletion(ctx context.Context, baseObjs client.Reader, live *unstructured.Unstructured, cause string) (string, []string) {
	reason, err := guard.Reason(ctx, baseObjs, live)
	switch {
	case err != nil:
		return DestroysData, []string{fmt.Sprintf("%s; Flux deletes it, and whether it holds data could not be read: %v", cause, err)}
	case reason != "":
		return DestroysData, []string{fmt.Sprintf("%s; Flux deletes it and nothing keeps it: %s", cause, reason)}
	}
	return Safe, []string{cause}
}

// claimResize: growth is safe where the StorageClass allows expansion;
// a shrink is refused by the API server.
func claimResize(headObjs client.Reader, b, h *unstructured.Unstructured) []finding {
	bq, bok := requestedStorage(b)
	hq, hok := requestedStorage(h)
	if !bok || !hok || bq.Cmp(hq) == 0 {
		return nil
	}
	if hq.Cmp(bq) < 0 {
		return []finding{{Recreate, fmt.Sprintf("storage request shrinks from %s to %s: the API server refuses to shrink a claim", bq.String(), hq.String())}}
	}
	class, _, _ := unstructured.NestedString(h.Object, "spec", "storageClassName")
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"})
	if err := headObjs.Get(context.Background(), client.ObjectKey{Name: class}, sc); err != nil {
		return []finding{{Safe, fmt.Sprintf("storage grows from %s to %s; StorageClass %q is not in the repository: the resize works only if it allows expansion", bq.String(), hq.String(), class)}}
	}
	if ok, _, _ := unstructured.NestedBool(sc.Object, "allowVolumeExpansion"); !ok {
		return []finding{{Recreate, fmt.Sprintf("storage grows from %s to %s but StorageClass %q does not allow expansion: the apply will fail", bq.String(), hq.String(), class)}}
	}
	return []finding{{Safe, fmt.Sprintf("storage grows from %s to %s (StorageClass %q allows expansion)", bq.String(), hq.String(), class)}}
}

func requestedStorage(o *unstructured.Unstructured) (resource.Quantity, bool) {
	s, found, _ := unstructured.NestedString(o.Object, "spec", "resources", "requests", "storage")
	if !found {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// volumeChange: a reclaimPolicy turned to Delete on a bound volume means
// deleting its claim deletes the data; new node affinity moves the data's
// home.
func volumeChange(b, h *unstructured.Unstructured) []finding {
	var found []finding
	bp, _, _ := unstructured.NestedString(b.Object, "spec", "persistentVolumeReclaimPolicy")
	hp, _, _ := unstructured.NestedString(h.Object, "spec", "persistentVolumeReclaimPolicy")
	if hp == "Delete" && bp != "Delete" {
		if _, bound, _ := unstructured.NestedMap(h.Object, "spec", "claimRef"); bound {
			found = append(found, finding{DestroysData, "reclaimPolicy turns to Delete while the volume is bound: deleting its claim will delete the data"})
		} else {
			found = append(found, finding{Disruptive, "reclaimPolicy turns to Delete: once bound, deleting the claim deletes the data"})
		}
	}
	if !fieldEqual(b, h, "spec", "nodeAffinity") {
		found = append(found, finding{Disruptive, "node affinity changes: the volume, and the pods that use it, move to other nodes (the API server may refuse the change on a bound volume)"})
	}
	return found
}

// claimTemplatesTakeOver: a StatefulSet that mounted an existing claim
// and now gets its volume from volumeClaimTemplates starts on new, empty
// volumes.
func claimTemplatesTakeOver(b, h *unstructured.Unstructured) []finding {
	bt, ht := templateNames(b), templateNames(h)
	var added []string
	for _, n := range ht {
		if !slices.Contains(bt, n) {
			added = append(added, n)
		}
	}
	if len(added) == 0 || len(claimNames(b)) == 0 {
		return nil
	}
	return []finding{{Disruptive, fmt.Sprintf("volumeClaimTemplates %v are new while the pods mounted existing claims %v: the app moves onto new, empty volumes", added, claimNames(b))}}
}

func templateNames(o *unstructured.Unstructured) []string {
	templates, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
	var names []string
	for _, t := range templates {
		m, _ := t.(map[string]any)
		if name, found, _ := unstructured.NestedString(m, "metadata", "name"); found {
			names = append(names, name)
		}
	}
	return names
}

// retentionTurnsToDelete: a StatefulSet whose claims will go with it, or
// with its scale-down, has a data deletion decided in advance.
func retentionTurnsToDelete(b, h *unstructured.Unstructured) []finding {
	var found []finding
	for _, when := range []string{"whenDeleted", "whenScaled"} {
		before, _, _ := unstructured.NestedString(b.Object, "spec", "persistentVolumeClaimRetentionPolicy", when)
		after, _, _ := unstructured.NestedString(h.Object, "spec", "persistentVolumeClaimRetentionPolicy", when)
		if after == "Delete" && before != "Delete" {
			found = append(found, finding{DestroysData, fmt.Sprintf("persistentVolumeClaimRetentionPolicy.%s becomes Delete: the claims, and their data, will be deleted %s",
				when, map[string]string{"whenDeleted": "when the StatefulSet is deleted", "whenScaled": "when it scales down"}[when])})
		}
	}
	return found
}

// existingClaimsMoved: a HelmRelease whose values name other existing
// claims (existingClaim, persistentVolumeClaim.claimName, at any depth)
// moves the app onto other data, or, with none left, onto new volumes.
func existingClaimsMoved(b, h *unstructured.Unstructured) []finding {
	bv, _, _ := unstructured.NestedMap(b.Object, "spec", "values")
	hv, _, _ := unstructured.NestedMap(h.Object, "spec", "values")
	bc, hc := existingClaims(bv), existingClaims(hv)
	if len(bc) == 0 || reflect.DeepEqual(bc, hc) {
		return nil
	}
	return []finding{{Disruptive, fmt.Sprintf("the chart's existing claims change from %v to %v: the app moves onto other or new, empty volumes", bc, hc)}}
}

// existingClaims collects the values that name an existing claim.
func existingClaims(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if s, ok := x.(string); ok && (k == "existingClaim" || k == "claimName") && s != "" {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(v)
	sort.Strings(out)
	return out
}

// claimsMoved: a workload that mounts other claims runs on other data.
func claimsMoved(b, h *unstructured.Unstructured) []finding {
	bc, hc := claimNames(b), claimNames(h)
	if reflect.DeepEqual(bc, hc) {
		return nil
	}
	return []finding{{Disruptive, fmt.Sprintf("the pods' volume claims change from %v to %v: the workload restarts on other data", bc, hc)}}
}

func claimNames(o *unstructured.Unstructured) []string {
	volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
	var names []string
	for _, v := range volumes {
		m, _ := v.(map[string]any)
		if name, found, _ := unstructured.NestedString(m, "persistentVolumeClaim", "claimName"); found {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// storageChange judges strata's storage kinds: devices leaving a volume
// group or a wipe turned on destroy data; failover changes move workloads.
func storageChange(b, h *unstructured.Unstructured) []finding {
	var found []finding
	if h.GetKind() == "LVMCluster" {
		found = append(found, lvmClusterChange(b, h)...)
	}
	if strings.Contains(h.GetKind(), "Failover") {
		found = append(found, finding{Disruptive, "failover policy changes: where workloads move when a node fails changes"})
	}
	if len(found) == 0 && !fieldEqual(b, h, "spec", "nodeSelector") {
		found = append(found, finding{Disruptive, "node selector changes: storage moves to other nodes"})
	}
	return found
}

func lvmClusterChange(b, h *unstructured.Unstructured) []finding {
	var found []finding
	before, after := deviceClasses(b), deviceClasses(h)
	for name, bc := range before {
		hc, ok := after[name]
		if !ok {
			found = append(found, finding{DestroysData, fmt.Sprintf("device class %q is removed: its volume group and every volume in it are lost once the opt-in allows it", name)})
			continue
		}
		for _, field := range []string{"paths", "optionalPaths"} {
			for _, p := range missing(stringList(bc, "deviceSelector", field), stringList(hc, "deviceSelector", field)) {
				found = append(found, finding{DestroysData, fmt.Sprintf("device %s leaves device class %q (deviceSelector.%s): removing a device from a volume group destroys the data on it", p, name, field)})
			}
		}
		bw, _, _ := unstructured.NestedBool(bc, "deviceSelector", "forceWipeDevicesAndDestroyAllData")
		hw, _, _ := unstructured.NestedBool(hc, "deviceSelector", "forceWipeDevicesAndDestroyAllData")
		if hw && !bw {
			found = append(found, finding{DestroysData, fmt.Sprintf("forceWipeDevicesAndDestroyAllData is turned on for device class %q: what is on its devices is wiped", name)})
		}
		if !reflect.DeepEqual(bc["fstype"], hc["fstype"]) {
			found = append(found, finding{Recreate, fmt.Sprintf("fstype of device class %q changes: refused while volumes of the class exist", name)})
		}
	}
	return found
}

func deviceClasses(o *unstructured.Unstructured) map[string]map[string]any {
	list, _, _ := unstructured.NestedSlice(o.Object, "spec", "storage", "deviceClasses")
	out := map[string]map[string]any{}
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			name, _ := m["name"].(string)
			out[name] = m
		}
	}
	return out
}

func stringList(m map[string]any, path ...string) []string {
	s, _, _ := unstructured.NestedStringSlice(m, path...)
	return s
}

func missing(before, after []string) []string {
	kept := map[string]bool{}
	for _, a := range after {
		kept[a] = true
	}
	var out []string
	for _, b := range before {
		if !kept[b] {
			out = append(out, b)
		}
	}
	return out
}

func fieldEqual(b, h *unstructured.Unstructured, path ...string) bool {
	bv, _, _ := unstructured.NestedFieldNoCopy(b.Object, path...)
	hv, _, _ := unstructured.NestedFieldNoCopy(h.Object, path...)
	return reflect.DeepEqual(bv, hv)
}
