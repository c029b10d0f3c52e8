package dashboard

import (
	"cmp"
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/rules"
)

// pageSize is how many claims one volumes page shows: the rest are a
// link away, so 10,000 claims cost the browser no more than 200.
const pageSize = 200

// Volumes is the volumes page: the claims of strata's classes the user
// may list, searched, sorted and cut into pages by the server.
type Volumes struct {
	Rows []VolumeRow
	// Total is every claim of a strata class shown to the user; Matched
	// those the search kept.
	Total, Matched int
	Query          VolumeQuery
	Pages          []PageLink
	Hidden         bool
	At             time.Time
}

// VolumeRow is one claim.
type VolumeRow struct {
	Namespace, Name, Class, Backend, Node, Phase string
	// Size is written only for the rows on the page; size sorts.
	Size     string
	size     int64
	quantity resource.Quantity
	// Pods are the pods mounting it; Snapshots its VolumeSnapshots.
	Pods, Snapshots []string
	// Pair is the ReplicationSource replicating it; Image the
	// VolumeImage it was filled from.
	Pair, Image string
}

// VolumeQuery is what the user asked the volumes page for.
type VolumeQuery struct {
	Search, Sort string
	Desc         bool
	Page         int
}

// PageLink is a link to one page of the search.
type PageLink struct {
	Number  int
	URL     string
	Current bool
}

// volumeSorts are the columns a volumes page sorts by.
var volumeSorts = map[string]func(a, b *VolumeRow) int{
	"name": func(a, b *VolumeRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	},
	"class":   func(a, b *VolumeRow) int { return cmp.Compare(a.Class, b.Class) },
	"backend": func(a, b *VolumeRow) int { return cmp.Compare(a.Backend, b.Backend) },
	"node":    func(a, b *VolumeRow) int { return cmp.Compare(a.Node, b.Node) },
	"size":    func(a, b *VolumeRow) int { return cmp.Compare(a.size, b.size) },
	"phase":   func(a, b *VolumeRow) int { return cmp.Compare(a.Phase, b.Phase) },
}

// volumeQueryOf reads the query from the URL, an unknown sort as by name.
func volumeQueryOf(v url.Values) VolumeQuery {
	search := strings.TrimSpace(v.Get("q"))
	if len(search) > maxSearch {
		search = search[:maxSearch] // no claim, node or class name is longer
	}
	q := VolumeQuery{Search: search, Sort: v.Get("sort"), Desc: v.Get("desc") == "1"}
	if _, ok := volumeSorts[q.Sort]; !ok {
		q.Sort = "name"
	}
	q.Page, _ = strconv.Atoi(v.Get("page"))
	q.Page = max(q.Page, 1)
	return q
}

// maxSearch bounds a search: longer than any name it can match.
const maxSearch = 256

// URL is the volumes page's address for the query, changed by change.
func (q VolumeQuery) URL(change func(*VolumeQuery)) string {
	change(&q)
	v := url.Values{}
	if q.Search != "" {
		v.Set("q", q.Search)
	}
	v.Set("sort", q.Sort)
	if q.Desc {
		v.Set("desc", "1")
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	return "volumes?" + v.Encode()
}

// SortURL sorts by column, reversing when it already sorts by it.
func (q VolumeQuery) SortURL(column string) string {
	return q.URL(func(n *VolumeQuery) { n.Desc, n.Sort, n.Page = n.Sort == column && !n.Desc, column, 1 })
}

// readOnly lists from the cache without copying: the pages only read.
var readOnly = client.UnsafeDisableDeepCopy

func (s *Server) volumesOf(ctx context.Context, u User, q VolumeQuery) (Volumes, error) {
	out := Volumes{At: s.now(), Query: q}
	var classes storagev1.StorageClassList
	if err := s.Reader.List(ctx, &classes, readOnly); err != nil {
		return out, err
	}
	claims, err := s.claims(ctx)
	if err != nil {
		return out, err
	}
	strataClasses := map[string]*storagev1.StorageClass{}
	for i, sc := range classes.Items {
		if sc.Provisioner == storagev1alpha1.CSIDriver {
			strataClasses[sc.Name] = &classes.Items[i]
		}
	}
	volumes, err := s.volumesWithoutNode(ctx, claims)
	if err != nil {
		return out, err
	}
	around := s.aroundClaims(ctx)
	may := s.listable(ctx, u, "", "persistentvolumeclaims")
	search := strings.ToLower(q.Search)
	rows := make([]VolumeRow, 0, len(claims))
	for _, c := range claims {
		sc := strataClasses[ptrValue(c.Spec.StorageClassName)]
		if sc == nil {
			continue
		}
		if !may(c.Namespace) {
			out.Hidden = true
			continue
		}
		out.Total++
		row := volumeRow(c, sc, volumes[c.Spec.VolumeName], around)
		if search != "" && !row.matches(search) {
			continue
		}
		rows = append(rows, row)
	}
	out.Matched = len(rows)
	// Sorted by pointer: 10,000 rows are not moved about, only pointers.
	order := make([]*VolumeRow, len(rows))
	for i := range rows {
		order[i] = &rows[i]
	}
	by := volumeSorts[q.Sort]
	slices.SortFunc(order, func(a, b *VolumeRow) int {
		if q.Desc {
			a, b = b, a
		}
		return cmp.Or(by(a, b), volumeSorts["name"](a, b))
	})
	out.Rows, out.Pages = pageOf(order, q)
	return out, nil
}

// volumesWithoutNode reads the PVs of the bound claims that do not say
// their node: the scheduler's selected-node annotation names it on every
// claim of a WaitForFirstConsumer class (strata's LVM classes), so the
// PVs, the largest objects here, are read only for claims bound
// otherwise (static PVs, Immediate classes).
func (s *Server) volumesWithoutNode(ctx context.Context, claims []*corev1.PersistentVolumeClaim) (map[string]*corev1.PersistentVolume, error) {
	needed := false
	for _, c := range claims {
		needed = needed || (c.Spec.VolumeName != "" && c.Annotations[selectedNodeAnnotation] == "")
	}
	if !needed {
		return nil, nil
	}
	var pvs corev1.PersistentVolumeList
	if err := s.Reader.List(ctx, &pvs, readOnly); err != nil {
		return nil, err
	}
	volumes := make(map[string]*corev1.PersistentVolume, len(pvs.Items))
	for i := range pvs.Items {
		volumes[pvs.Items[i].Name] = &pvs.Items[i]
	}
	return volumes, nil
}

// pageOf cuts the rows to the query's page and links every page.
func pageOf(rows []*VolumeRow, q VolumeQuery) ([]VolumeRow, []PageLink) {
	pages := max(1, (len(rows)+pageSize-1)/pageSize)
	var links []PageLink
	if pages > 1 {
		for n := 1; n <= pages; n++ {
			links = append(links, PageLink{Number: n, Current: n == q.Page, URL: q.URL(func(v *VolumeQuery) { v.Page = n })})
		}
	}
	// A page past the last (or so large it would overflow) is the last.
	from := (min(q.Page, pages) - 1) * pageSize
	// A copy, so that what is kept of the page is its rows, not all.
	page := make([]VolumeRow, 0, min(from+pageSize, len(rows))-from)
	for _, r := range rows[from:min(from+pageSize, len(rows))] {
		row := *r
		row.Size = row.quantity.String()
		page = append(page, row)
	}
	return page, links
}

func (r VolumeRow) matches(search string) bool {
	for _, f := range append([]string{r.Namespace + "/" + r.Name, r.Class, r.Backend, r.Node, r.Phase, r.Pair, r.Image}, r.Pods...) {
		if strings.Contains(strings.ToLower(f), search) {
			return true
		}
	}
	return false
}

// claimsAround are, per claim, what refers to it: the
// pods mounting it, its snapshots and its ReplicationSource.
type claimsAround struct {
	pods, snapshots map[claimKey][]string
	pairs           map[claimKey]string
}

// claimKey names a claim without building a string for it.
type claimKey struct{ namespace, name string }

// aroundClaims reads what refers to claims. Snapshots are left out where
// their CRD is not installed.
func (s *Server) aroundClaims(ctx context.Context) claimsAround {
	a := claimsAround{pods: map[claimKey][]string{}, snapshots: map[claimKey][]string{}, pairs: map[claimKey]string{}}
	var pods corev1.PodList
	if s.Reader.List(ctx, &pods, readOnly) == nil {
		for _, p := range pods.Items {
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					key := claimKey{p.Namespace, v.PersistentVolumeClaim.ClaimName}
					a.pods[key] = append(a.pods[key], p.Name)
				}
			}
		}
	}
	var snaps snapshotv1.VolumeSnapshotList
	if s.Reader.List(ctx, &snaps, readOnly) == nil {
		for _, sn := range snaps.Items {
			if c := sn.Spec.Source.PersistentVolumeClaimName; c != nil {
				key := claimKey{sn.Namespace, *c}
				a.snapshots[key] = append(a.snapshots[key], sn.Name)
			}
		}
	}
	var sources volsyncv1alpha1.ReplicationSourceList
	if s.Reader.List(ctx, &sources, readOnly) == nil {
		for _, rs := range sources.Items {
			a.pairs[claimKey{rs.Namespace, rs.Spec.SourcePVC}] = rs.Name
		}
	}
	return a
}

// volumeRow is one claim with its volume and what refers to it.
func volumeRow(c *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, pv *corev1.PersistentVolume, a claimsAround) VolumeRow {
	key := claimKey{c.Namespace, c.Name}
	r := VolumeRow{Namespace: c.Namespace, Name: c.Name, Class: sc.Name, Phase: string(c.Status.Phase),
		Pods: a.pods[key], Snapshots: a.snapshots[key], Pair: a.pairs[key], Backend: "lvm", Node: c.Annotations[selectedNodeAnnotation]}
	if rules.IsBtrfsClass(sc.Parameters) {
		r.Backend = "btrfs"
		if r.Node = sc.Parameters[rules.HostNodeParameter]; r.Node == "" {
			r.Backend = "btrfs over NFS"
		}
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if got, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
		size = got
	}
	r.quantity, r.size = size, size.Value()
	if n := nodeOf(pv); n != "" {
		r.Node = n
	}
	if ref := c.Spec.DataSourceRef; ref != nil && ref.Kind == storagev1alpha1.VolumeImageKind {
		r.Image = ref.Name
	}
	return r
}

// selectedNodeAnnotation is where the scheduler puts the node a claim's
// first pod goes to.
const selectedNodeAnnotation = storagev1alpha1.SelectedNodeAnnotation

// nodeOf is the one node a volume's affinity pins it to, if any.
func nodeOf(pv *corev1.PersistentVolume) string {
	if pv == nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
