package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/volumeusage"
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
	Size string
	size int64
	// Used is what the claim's node last measured of it ("" not known),
	// UsedBytes the same in bytes (-1 not known); written only for the
	// rows on the page unless the page sorts by it.
	Used      string
	UsedBytes int64
	// Pods are the pods mounting it; Snapshots its VolumeSnapshots.
	Pods, Snapshots []string
	// Pair is the ReplicationSource replicating it; Image the
	// VolumeImage it was filled from.
	Pair, Image string
	// claim is the cache's, read for the rows on the page only.
	claim *corev1.PersistentVolumeClaim
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
	"used":    func(a, b *VolumeRow) int { return cmp.Compare(a.UsedBytes, b.UsedBytes) },
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
	classes, err := s.strataClasses(ctx)
	if err != nil {
		return out, err
	}
	claims, err := s.claims(ctx)
	if err != nil {
		return out, err
	}
	around := s.aroundClaims(ctx)
	may := s.listable(ctx, u, "", "persistentvolumeclaims")
	kept := rowsKept.Get().(*[]VolumeRow)
	rows := (*kept)[:0]
	defer func() { keepRows(kept, rows) }()
	var nodeless []int // rows whose node only their PV knows
	for _, c := range claims {
		class, ok := classes[ptrValue(c.Spec.StorageClassName)]
		if !ok {
			continue
		}
		if !may(c.Namespace) {
			out.Hidden = true
			continue
		}
		rows = append(rows, volumeRow(c, class, around))
		if r := &rows[len(rows)-1]; r.Node == "" && c.Spec.VolumeName != "" {
			nodeless = append(nodeless, len(rows)-1)
		}
	}
	if err := s.nodesFromVolumes(ctx, rows, nodeless); err != nil {
		return out, err
	}
	out.Total = len(rows)
	if search := strings.ToLower(q.Search); search != "" {
		rows = slices.DeleteFunc(rows, func(r VolumeRow) bool { return !r.matches(search) })
	}
	out.Matched = len(rows)
	if q.Sort == "used" {
		for i := range rows {
			s.usageOf(&rows[i])
		}
	}
	out.Rows, out.Pages = pageOf(sortedRows(rows, q), q)
	for i := range out.Rows {
		s.usageOf(&out.Rows[i])
	}
	return out, nil
}

// usageOf fills in what the claim's node last measured of it: looked up
// for the rows shown (or sorted by it), not for 10,000 each build.
func (s *Server) usageOf(r *VolumeRow) {
	r.UsedBytes = -1
	if s.Usage == nil {
		return
	}
	if u, ok := s.Usage.Of(volumeusage.Claim{Namespace: r.Namespace, Name: r.Name}); ok {
		r.UsedBytes, r.Used = u.Used, humanBytes(u.Used)
		if u.Capacity > 0 {
			r.Used += fmt.Sprintf(" (%d %%)", u.Used*100/u.Capacity)
		}
	}
}

// rowsKept holds a built page's rows for the next: 10,000 rows are some
// 2 MB a build, garbage as soon as the page is drawn (pageOf copies the
// rows shown), which a page built after every change would make the
// garbage collector's constant work.
var rowsKept = sync.Pool{New: func() any { return new([]VolumeRow) }}

// keepRows gives rows back, emptied so that they hold no claim alive.
func keepRows(kept *[]VolumeRow, rows []VolumeRow) {
	clear(rows[:cap(rows)])
	*kept = rows[:0]
	rowsKept.Put(kept)
}

// sortedRows orders the rows as the query asks, by name within a tie.
// Sorted by pointer: 10,000 rows are not moved about, only pointers.
func sortedRows(rows []VolumeRow, q VolumeQuery) []*VolumeRow {
	order := make([]*VolumeRow, len(rows))
	for i := range rows {
		order[i] = &rows[i]
	}
	by, byName := volumeSorts[q.Sort], volumeSorts["name"]
	slices.SortFunc(order, func(a, b *VolumeRow) int {
		if q.Desc {
			a, b = b, a
		}
		return cmp.Or(by(a, b), byName(a, b))
	})
	return order
}

// classView is what a strata class says of its claims: their backend,
// and their node where the class has one.
type classView struct{ name, backend, node string }

// strataClasses are strata's StorageClasses by name.
func (s *Server) strataClasses(ctx context.Context) (map[string]classView, error) {
	var classes storagev1.StorageClassList
	if err := s.Reader.List(ctx, &classes, readOnly); err != nil {
		return nil, err
	}
	out := map[string]classView{}
	for _, sc := range classes.Items {
		if sc.Provisioner != storagev1alpha1.CSIDriver {
			continue
		}
		v := classView{name: sc.Name, backend: "lvm"}
		if rules.IsBtrfsClass(sc.Parameters) {
			v.backend = "btrfs"
			if v.node = sc.Parameters[rules.HostNodeParameter]; v.node == "" {
				v.backend = "btrfs over NFS"
			}
		}
		out[sc.Name] = v
	}
	return out, nil
}

// nodesFromVolumes fills the node of the rows at nodeless from their
// PVs. The scheduler's selected-node annotation names it on every claim
// of a WaitForFirstConsumer class (strata's LVM classes), so the PVs,
// the largest objects here, are read only for claims bound otherwise
// (static PVs, Immediate classes).
func (s *Server) nodesFromVolumes(ctx context.Context, rows []VolumeRow, nodeless []int) error {
	if len(nodeless) == 0 {
		return nil
	}
	pvs, err := stored[corev1.PersistentVolume](ctx, s.Reader, &corev1.PersistentVolumeList{})
	if err != nil {
		return err
	}
	byName := make(map[string]*corev1.PersistentVolume, len(pvs))
	for _, pv := range pvs {
		byName[pv.Name] = pv
	}
	for _, i := range nodeless {
		rows[i].Node = nodeOf(byName[rows[i].claim.Spec.VolumeName])
	}
	return nil
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
		size := sizeOf(r.claim)
		row.Size, row.claim = size.String(), nil
		page = append(page, row)
	}
	return page, links
}

// matches says whether search, lower case, is in any of the row's
// names. It allocates nothing for names already in lower case, as
// Kubernetes' are.
func (r *VolumeRow) matches(search string) bool {
	has := func(f string) bool { return strings.Contains(strings.ToLower(f), search) }
	if has(r.Namespace) || has(r.Name) || has(r.Class) || has(r.Backend) || has(r.Node) || has(r.Phase) || has(r.Pair) || has(r.Image) ||
		slices.ContainsFunc(r.Pods, has) {
		return true
	}
	// A search across the slash, as the page writes a claim.
	return strings.Contains(search, "/") && has(r.Namespace+"/"+r.Name)
}

// claimsAround are, per claim, what refers to it: the
// pods mounting it, its snapshots and its ReplicationSource.
type claimsAround struct {
	pods, snapshots map[claimKey][]string
	pairs           map[claimKey]string
	// any is false when nothing refers to any claim: no look-ups then.
	any bool
}

// claimKey names a claim without building a string for it.
type claimKey struct{ namespace, name string }

// aroundClaims reads what refers to claims. Snapshots are left out where
// their CRD is not installed.
func (s *Server) aroundClaims(ctx context.Context) claimsAround {
	a := claimsAround{pods: map[claimKey][]string{}, snapshots: map[claimKey][]string{}, pairs: map[claimKey]string{}}
	if pods, err := stored[corev1.Pod](ctx, s.Reader, &corev1.PodList{}); err == nil {
		for _, p := range pods {
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					key := claimKey{p.Namespace, v.PersistentVolumeClaim.ClaimName}
					a.pods[key] = append(a.pods[key], p.Name)
				}
			}
		}
	}
	if snaps, err := stored[snapshotv1.VolumeSnapshot](ctx, s.Reader, &snapshotv1.VolumeSnapshotList{}); err == nil {
		for _, sn := range snaps {
			if c := sn.Spec.Source.PersistentVolumeClaimName; c != nil {
				key := claimKey{sn.Namespace, *c}
				a.snapshots[key] = append(a.snapshots[key], sn.Name)
			}
		}
	}
	if sources, err := stored[volsyncv1alpha1.ReplicationSource](ctx, s.Reader, &volsyncv1alpha1.ReplicationSourceList{}); err == nil {
		for _, rs := range sources {
			a.pairs[claimKey{rs.Namespace, rs.Spec.SourcePVC}] = rs.Name
		}
	}
	a.any = len(a.pods)+len(a.snapshots)+len(a.pairs) > 0
	return a
}

// volumeRow is one claim of a strata class with what refers to it.
func volumeRow(c *corev1.PersistentVolumeClaim, class classView, a claimsAround) VolumeRow {
	r := VolumeRow{Namespace: c.Namespace, Name: c.Name, Class: class.name, Backend: class.backend, Node: class.node,
		Phase: string(c.Status.Phase), claim: c}
	if r.Node == "" {
		r.Node = c.Annotations[selectedNodeAnnotation]
	}
	if a.any {
		key := claimKey{c.Namespace, c.Name}
		r.Pods, r.Snapshots, r.Pair = a.pods[key], a.snapshots[key], a.pairs[key]
	}
	size := sizeOf(c)
	r.size = size.Value()
	if ref := c.Spec.DataSourceRef; ref != nil && ref.Kind == storagev1alpha1.VolumeImageKind {
		r.Image = ref.Name
	}
	return r
}

// sizeOf is a claim's capacity once bound, else its request.
func sizeOf(c *corev1.PersistentVolumeClaim) resource.Quantity {
	if got, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
		return got
	}
	return c.Spec.Resources.Requests[corev1.ResourceStorage]
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
