package skipapply

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

	"github.com/strata-gitops/strata/reconciler/apply"
)

// Client saves a request per object on a first apply. Flux's ssa
// reads every object and then dry-runs it; for an object the Kustomization
// never applied, the read is nearly always a 404. The probe answers that
// read with the dry-run instead: when the server says the dry-run would
// create the object (no resourceVersion, ssa's own test for "created"),
// the read is answered NotFound and ssa's dry-run, which follows at once,
// gets the same answer. When the object exists, or the dry-run fails, the
// read goes to the server and ssa dry-runs on its own, as without the
// probe. Either way ssa gets the server's answers; only the two requests
// swap places, inside the window ssa already leaves between them.
//
// It also remembers the resourceVersion of every object the apply engine
// read or patched (dry-run or not), so that after an apply the Record
// holds each object's version as the server last returned it (Record).
// It is the one client the skip-apply layer puts under the apply engine.
type Client struct {
	client.Client

	mu       sync.Mutex
	expected map[object.ObjMetadata]*unstructured.Unstructured
	dryRuns  map[object.ObjMetadata]dryRun
	seen     map[object.ObjMetadata]string
}

// dryRun is a create the server accepted as a dry-run: what was sent and
// what came back.
type dryRun struct {
	sent, result *unstructured.Unstructured
}

// NewClient is the skip-apply layer over c, for one apply.
func NewClient(c client.Client) *Client {
	return &Client{Client: c, seen: map[object.ObjMetadata]string{}}
}

// Expect names the objects about to be applied that are not in inv, the
// inventory of the last apply: those are probably new. Objects excluded
// from the apply (Flux's reconcile: disabled and ssa: Ignore) are left to
// ssa, which skips them after its read.
func (p *Client) Expect(objects []*unstructured.Unstructured, inv *kustomizev1.ResourceInventory, excluded map[string]string) {
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

// Done drops what Expect named, once the apply is over.
func (p *Client) Done() {
	p.mu.Lock()
	p.expected, p.dryRuns = nil, nil
	p.mu.Unlock()
}

func (p *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	id := apply.ObjMetadata(obj)
	id.Namespace, id.Name = key.Namespace, key.Name
	desired := p.takeExpected(id)
	if desired == nil {
		return p.get(ctx, key, obj, opts...)
	}
	sent := desired.DeepCopy()
	result := sent.DeepCopy()
	//nolint:staticcheck // sent as ssa sends its dry-run, so the answers match
	err := p.Client.Patch(ctx, result, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner(apply.FieldManager))
	if err != nil || result.GetResourceVersion() != "" {
		return p.get(ctx, key, obj, opts...)
	}
	p.mu.Lock()
	p.dryRuns[id] = dryRun{sent: sent, result: result}
	p.mu.Unlock()
	return apierrors.NewNotFound(p.resource(obj.GetObjectKind().GroupVersionKind()), key.Name)
}

// Patch answers ssa's dry-run of an object the probe found absent with the
// probe's dry-run, when ssa sends exactly what the probe sent.
func (p *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && patch.Type() == types.ApplyPatchType && isDryRun(opts) {
		if d, found := p.takeDryRun(apply.ObjMetadata(u)); found && reflect.DeepEqual(d.sent.Object, u.Object) {
			u.Object = d.result.DeepCopy().Object
			return nil
		}
	}
	err := p.Client.Patch(ctx, obj, patch, opts...)
	p.note(obj, err)
	return err
}

// get reads from the server, noting the version read.
func (p *Client) get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := p.Client.Get(ctx, key, obj, opts...)
	p.note(obj, err)
	return err
}

// Delete deletes, and forgets the object's version.
func (p *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := p.Client.Delete(ctx, obj, opts...)
	p.mu.Lock()
	delete(p.seen, apply.ObjMetadata(obj))
	p.mu.Unlock()
	return err
}

func (p *Client) note(obj client.Object, err error) {
	if err != nil || obj.GetResourceVersion() == "" {
		return
	}
	p.mu.Lock()
	p.seen[apply.ObjMetadata(obj)] = obj.GetResourceVersion()
	p.mu.Unlock()
}

// Record returns the Record of the objects an apply of obj's render
// (digest) left, or false when the apply did not show the version of one
// of them.
func (p *Client) Record(obj *kustomizev1.Kustomization, digest string, objects []*unstructured.Unstructured) (Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := Record{Generation: obj.Generation, Digest: digest}
	for _, o := range objects {
		rv, ok := p.seen[apply.ObjMetadata(o)]
		if !ok {
			return Record{}, false
		}
		rec.Objects = append(rec.Objects, ObjVersion{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
			Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: rv,
		})
	}
	return rec, true
}

func (p *Client) takeExpected(id object.ObjMetadata) *unstructured.Unstructured {
	p.mu.Lock()
	defer p.mu.Unlock()
	desired := p.expected[id]
	delete(p.expected, id)
	return desired
}

func (p *Client) takeDryRun(id object.ObjMetadata) (dryRun, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, found := p.dryRuns[id]
	delete(p.dryRuns, id)
	return d, found
}

// resource names gvk's resource in the NotFound answer, as the server would.
func (p *Client) resource(gvk schema.GroupVersionKind) schema.GroupResource {
	if m, err := p.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}
}

func isDryRun(opts []client.PatchOption) bool {
	return len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) > 0
}
