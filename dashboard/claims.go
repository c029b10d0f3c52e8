package dashboard

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// claims are every claim, read-only. From an informer cache they are the
// store's own objects: listing 10,000 claims through the cache reader
// would copy each into a new slice on every page built, the most of what
// a page allocates. From another reader they are listed.
func (s *Server) claims(ctx context.Context) ([]*corev1.PersistentVolumeClaim, error) {
	if c, ok := s.Reader.(cache.Cache); ok {
		inf, err := c.GetInformer(ctx, &corev1.PersistentVolumeClaim{})
		if err != nil {
			return nil, err
		}
		if indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
			items := indexed.GetIndexer().List()
			out := make([]*corev1.PersistentVolumeClaim, 0, len(items))
			for _, o := range items {
				if c, ok := o.(*corev1.PersistentVolumeClaim); ok {
					out = append(out, c)
				}
			}
			return out, nil
		}
	}
	var list corev1.PersistentVolumeClaimList
	if err := s.Reader.List(ctx, &list, readOnly); err != nil {
		return nil, err
	}
	out := make([]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
