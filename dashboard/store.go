package dashboard

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stored is every object of T's kind, read-only. From an informer cache
// they are the store's own objects: listing 10,000 claims through the
// cache reader would copy each into a new slice on every page built, the
// most of what a page allocates. From another reader (tests) list is
// listed.
func stored[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, list client.ObjectList) ([]PT, error) {
	if c, ok := r.(cache.Cache); ok {
		inf, err := c.GetInformer(ctx, PT(new(T)))
		if err != nil {
			return nil, err
		}
		if indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
			return ofType[PT](indexed.GetIndexer().List()), nil
		}
	}
	if err := r.List(ctx, list, readOnly); err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	return ofType[PT](items), nil
}

// ofType keeps the items that are PTs.
func ofType[PT any, O any](items []O) []PT {
	out := make([]PT, 0, len(items))
	for _, o := range items {
		if obj, ok := any(o).(PT); ok {
			out = append(out, obj)
		}
	}
	return out
}

// claims are every claim, read-only (stored).
func (s *Server) claims(ctx context.Context) ([]*corev1.PersistentVolumeClaim, error) {
	return stored[corev1.PersistentVolumeClaim](ctx, s.Reader, &corev1.PersistentVolumeClaimList{})
}
