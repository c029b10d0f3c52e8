package kustomization

import (
	"context"
	"reflect"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/engine/apply"
)

// creationProbe saves a request per object on a first apply. Flux's ssa
// reads every object and then dry-runs it; for an object the Kustomization
// never applied, the read is nearly always a 404. The probe answers that
// read with the dry-run instead: when the server says the dry-run would
// create the object (no resourceVersion, ssa's own test for "created"),
// the read is answered NotFound and ssa's dry-run, which follows at once,
// gets the same answer. When the object exists, or the dry-run fails, the
// read goes to the server and ssa dry-runs on its own, as without the
// probe. Either way ssa gets the server's answers; only the two requests
// swap places, inside the window ssa already leaves between them.
type creationProbe struct {
	client.Client

	mu       sync.Mutex
	expected map[object.ObjMetadata]*unstructured.Unstructured
	dryRuns  map[object.ObjMetadata]dryRun
}

// dryRun is a create the server accepted as a dry-run: what was sent and
// what came back.
type dryRun struct {
	sent, result *unstructured.Unstructured
}

// newCreationProbe probes the creations made through c.
func newCreationProbe(c client.Client) *creationProbe {
	return &creationProbe{Client: c}
}

// expect names the objects about to be applied that are not in inv, the
// inventory of the last apply: those are probably new. Objects excluded
// from the apply (Flux's reconcile: disabled and ssa: Ignore) are left to
// ssa, which skips them after its read.
func (p *creationProbe) expect(objects []*unstructured.Unstructured, inv *kustomizev1.ResourceInventory, excluded map[string]string) {
	applied := map[string]bool{}
	if inv != nil {
		for _, e := range inv.Entries {
			applied[e.ID] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected = map[object.ObjMetadata]*unstructured.Unstructured{}
	p.dryRuns = map[object.ObjMetadata]dryRun{}
	for _, o := range objects {
		if id := apply.ObjMetadata(o); !applied[id.String()] && !ssautils.AnyInMetadata(o, excluded) {
			p.expected[id] = o
		}
	}
}

// forget drops what expect named, once the apply is over.
func (p *creationProbe) forget() {
	p.mu.Lock()
	p.expected, p.dryRuns = nil, nil
	p.mu.Unlock()
}

func (p *creationProbe) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	id := apply.ObjMetadata(obj)
	id.Namespace, id.Name = key.Namespace, key.Name
	desired := p.takeExpected(id)
	if desired == nil {
		return p.Client.Get(ctx, key, obj, opts...)
	}
	sent := desired.DeepCopy()
	result := sent.DeepCopy()
	//nolint:staticcheck // sent as ssa sends its dry-run, so the answers match
	err := p.Client.Patch(ctx, result, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner(apply.FieldManager))
	if err != nil || result.GetResourceVersion() != "" {
		return p.Client.Get(ctx, key, obj, opts...)
	}
	p.mu.Lock()
	p.dryRuns[id] = dryRun{sent: sent, result: result}
	p.mu.Unlock()
	return apierrors.NewNotFound(p.resource(obj.GetObjectKind().GroupVersionKind()), key.Name)
}

// Patch answers ssa's dry-run of an object the probe found absent with the
// probe's dry-run, when ssa sends exactly what the probe sent.
func (p *creationProbe) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && patch.Type() == types.ApplyPatchType && isDryRun(opts) {
		if d, found := p.takeDryRun(apply.ObjMetadata(u)); found && reflect.DeepEqual(d.sent.Object, u.Object) {
			u.Object = d.result.DeepCopy().Object
			return nil
		}
	}
	return p.Client.Patch(ctx, obj, patch, opts...)
}

func (p *creationProbe) takeExpected(id object.ObjMetadata) *unstructured.Unstructured {
	p.mu.Lock()
	defer p.mu.Unlock()
	desired := p.expected[id]
	delete(p.expected, id)
	return desired
}

func (p *creationProbe) takeDryRun(id object.ObjMetadata) (dryRun, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, found := p.dryRuns[id]
	delete(p.dryRuns, id)
	return d, found
}

// resource names gvk's resource in the NotFound answer, as the server would.
func (p *creationProbe) resource(gvk schema.GroupVersionKind) schema.GroupResource {
	if m, err := p.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}
}

func isDryRun(opts []client.PatchOption) bool {
	return len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) > 0
}
