package plan

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/scheme"
)

// repoObjects is what one side of the plan renders, readable as a cluster
// would be: postBuild.substituteFrom finds the ConfigMaps and Secrets the
// repository defines, and the data-loss guard finds the PVCs in a
// Namespace and the objects of a CRD. It only reads; the client methods
// that write are never called on it (rendering and the guard only read).
type repoObjects struct {
	client.Client // nil: only Get and List are served
	mu            sync.RWMutex
	byKey         map[objKey]*unstructured.Unstructured
	// outside serves the ConfigMaps and Secrets the repository does not
	// define (--substitute-from, the cluster with --kubeconfig); nil for
	// none.
	outside client.Reader
}

// objKey identifies an object across revisions; the API version may
// change without changing the object.
type objKey struct {
	Group, Kind, Namespace, Name string
}

func keyOf(o *unstructured.Unstructured) objKey {
	gvk := o.GroupVersionKind()
	return objKey{gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName()}
}

func (k objKey) String() string {
	name := k.Name
	if k.Namespace != "" {
		name = k.Namespace + "/" + k.Name
	}
	return k.Kind + "/" + name
}

func newRepoObjects() *repoObjects {
	return &repoObjects{byKey: map[objKey]*unstructured.Unstructured{}}
}

// all lists the objects.
func (r *repoObjects) all() []*unstructured.Unstructured {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*unstructured.Unstructured, 0, len(r.byKey))
	for _, o := range r.byKey {
		out = append(out, o)
	}
	return out
}

// find is the object of a group, kind, namespace and name the side
// renders, or an error naming it.
func (r *repoObjects) find(group, kind, namespace, name string) (*unstructured.Unstructured, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if o, ok := r.byKey[objKey{group, kind, namespace, name}]; ok {
		return o, nil
	}
	return nil, fmt.Errorf("%s %s/%s is not in the repository", kind, namespace, name)
}

func (r *repoObjects) add(objects []*unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range objects {
		r.byKey[keyOf(o)] = o
	}
}

func (r *repoObjects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := gvkOf(obj)
	if err != nil {
		return err
	}
	r.mu.RLock()
	found, ok := r.byKey[objKey{gvk.Group, gvk.Kind, key.Namespace, key.Name}]
	r.mu.RUnlock()
	if !ok {
		if r.outside != nil && gvk.Group == "" && (gvk.Kind == "ConfigMap" || gvk.Kind == "Secret") {
			return r.outside.Get(context.Background(), key, obj)
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		found.DeepCopyInto(u)
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(found.Object, obj)
}

func (r *repoObjects) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	u, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return fmt.Errorf("the repository's objects are listed as unstructured only")
	}
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	gvk := u.GroupVersionKind()
	kind := strings.TrimSuffix(gvk.Kind, "List")
	r.mu.RLock()
	defer r.mu.RUnlock()
	for k, obj := range r.byKey {
		if k.Group == gvk.Group && k.Kind == kind && (o.Namespace == "" || k.Namespace == o.Namespace) {
			u.Items = append(u.Items, *obj.DeepCopy())
			if o.Limit > 0 && int64(len(u.Items)) >= o.Limit {
				break
			}
		}
	}
	return nil
}

func gvkOf(obj client.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk, nil
	}
	gvks, _, err := scheme.New().ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("unknown kind %T: %w", obj, err)
	}
	return gvks[0], nil
}

// readers reads from each in turn, until one has the object.
type readers []client.Reader

func (rs readers) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := error(apierrors.NewNotFound(schema.GroupResource{}, key.Name))
	for _, r := range rs {
		if err = r.Get(ctx, key, obj, opts...); !apierrors.IsNotFound(err) {
			return err
		}
	}
	return err
}

func (rs readers) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("listing is not served from outside the repository")
}
