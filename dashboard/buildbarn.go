package dashboard

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/objects"
)

// BuildbarnPage is the Buildbarn and images page.
type BuildbarnPage struct {
	Installations []Installation
	Fills         []FillView
	Hidden        bool
	At            time.Time
}

// Installation is one namespace's Buildbarn: its components, and its
// storage's shards with their claims.
type Installation struct {
	Namespace  string
	Components []ComponentView
	// Skew marks components on more than one release where the
	// installation does not allow it.
	Skew   bool
	Shards []Shard
}

// ComponentView is one component.
type ComponentView struct {
	Kind, Name, State, Version, Image string
	Replicas, Ready                   int32
	// AllowSkew is the component's allowVersionSkew; Skewed marks a
	// release other than the installation's without it.
	AllowSkew, Skewed bool
}

// Shard is one storage shard: its number and its claims.
type Shard struct {
	Storage string
	Number  int
	Claims  []string
}

// FillView is a claim filled from a VolumeImage and the stage its fill is
// at.
type FillView struct {
	Namespace, Name, Image, Node, Stage string
	Failures                            int
	RetryAt                             string
}

// componentKind is one of the five kinds: its name, its resource and a
// new list of it.
type componentKind struct {
	kind, resource string
	list           func() client.ObjectList
}

// componentKinds are the five, in the order an installation is brought up.
var componentKinds = []componentKind{
	{"BuildbarnStorage", "buildbarnstorages", func() client.ObjectList { return &bbv1.BuildbarnStorageList{} }},
	{"BuildbarnScheduler", "buildbarnschedulers", func() client.ObjectList { return &bbv1.BuildbarnSchedulerList{} }},
	{"BuildbarnFrontend", "buildbarnfrontends", func() client.ObjectList { return &bbv1.BuildbarnFrontendList{} }},
	{"BuildbarnWorker", "buildbarnworkers", func() client.ObjectList { return &bbv1.BuildbarnWorkerList{} }},
	{"BuildbarnBrowser", "buildbarnbrowsers", func() client.ObjectList { return &bbv1.BuildbarnBrowserList{} }},
}

func (s *Server) buildbarnOf(ctx context.Context, u User) (BuildbarnPage, error) {
	out := BuildbarnPage{At: s.now()}
	claims, err := s.claims(ctx)
	if err != nil {
		return out, err
	}
	byNamespace := map[string]*Installation{}
	for _, k := range componentKinds {
		l := k.list()
		err := s.Reader.List(ctx, l, readOnly)
		if meta.IsNoMatchError(err) {
			break // Buildbarn's kinds are not served here
		}
		if err != nil {
			return out, err
		}
		if err := s.addComponents(ctx, u, k, l, byNamespace, &out.Hidden); err != nil {
			return out, err
		}
	}
	for _, in := range byNamespace {
		in.Skew = markSkew(in.Components)
		in.Shards = shardsOf(in, claims)
		out.Installations = append(out.Installations, *in)
	}
	slices.SortFunc(out.Installations, func(a, b Installation) int { return strings.Compare(a.Namespace, b.Namespace) })
	fills, hidden := s.fillsOf(ctx, u, claims)
	out.Fills, out.Hidden = fills, out.Hidden || hidden
	return out, nil
}

// addComponents puts a list's components, of the namespaces u may list
// them in, in their installations.
func (s *Server) addComponents(ctx context.Context, u User, k componentKind, l client.ObjectList, into map[string]*Installation, hidden *bool) error {
	may := s.listable(ctx, u, bbv1.GroupVersion.Group, k.resource)
	return meta.EachListItem(l, func(o runtime.Object) error {
		c, ok := o.(bbv1.Component)
		if !ok {
			return nil
		}
		if !may(c.GetNamespace()) {
			*hidden = true
			return nil
		}
		in := into[c.GetNamespace()]
		if in == nil {
			in = &Installation{Namespace: c.GetNamespace()}
			into[c.GetNamespace()] = in
		}
		st := c.GetStatus()
		in.Components = append(in.Components, ComponentView{Kind: k.kind, Name: c.GetName(), State: st.State, Version: st.Version,
			Image: st.Image, Replicas: st.Replicas, Ready: st.ReadyReplicas, AllowSkew: c.GetComponent().AllowVersionSkew})
		return nil
	})
}

// markSkew marks the components whose release differs from the
// installation's most common one, unless they allow it, and says whether
// any was marked.
func markSkew(cs []ComponentView) bool {
	count := map[string]int{}
	for _, c := range cs {
		if c.Version != "" {
			count[c.Version]++
		}
	}
	common := ""
	for v, n := range count {
		if n > count[common] || (n == count[common] && v < common) {
			common = v
		}
	}
	skew := false
	for i := range cs {
		cs[i].Skewed = !cs[i].AllowSkew && cs[i].Version != "" && cs[i].Version != common
		skew = skew || cs[i].Skewed
	}
	return skew
}

// shardsOf are the installation's storage shards, each with the claims
// its StatefulSet made for it (cas-NAME-N, ac-NAME-N, fsac-NAME-N).
func shardsOf(in *Installation, claims []*corev1.PersistentVolumeClaim) []Shard {
	var shards []Shard
	for _, c := range in.Components {
		if c.Kind != "BuildbarnStorage" {
			continue
		}
		byNumber := map[int]*Shard{}
		for _, pvc := range claims {
			l := pvc.Labels
			if pvc.Namespace != in.Namespace || l[objects.ComponentLabel] != "storage" || l[objects.InstanceLabel] != c.Name {
				continue
			}
			i := strings.LastIndexByte(pvc.Name, '-')
			n, err := strconv.Atoi(pvc.Name[i+1:])
			if i < 0 || err != nil {
				continue
			}
			if byNumber[n] == nil {
				byNumber[n] = &Shard{Storage: c.Name, Number: n}
			}
			byNumber[n].Claims = append(byNumber[n].Claims, pvc.Name)
		}
		for n := 0; n < len(byNumber) || byNumber[n] != nil; n++ {
			if sh := byNumber[n]; sh != nil {
				slices.Sort(sh.Claims)
				shards = append(shards, *sh)
			}
		}
	}
	return shards
}

// fillsOf are the claims filled from VolumeImages in namespaces u may
// list claims in, with their stage read from the populator's prime claim
// and pod.
func (s *Server) fillsOf(ctx context.Context, u User, claims []*corev1.PersistentVolumeClaim) (fills []FillView, hidden bool) {
	primes := map[string]*corev1.PersistentVolumeClaim{}
	for _, c := range claims {
		if ns, name := c.Labels[storagev1alpha1.PopulatorClaimNamespaceLabel], c.Labels[storagev1alpha1.PopulatorClaimNameLabel]; ns != "" {
			primes[ns+"/"+name] = c
		}
	}
	pods := map[string]corev1.PodPhase{}
	var list corev1.PodList
	if s.Reader.List(ctx, &list, readOnly, client.HasLabels{storagev1alpha1.PopulatorClaimNameLabel}) == nil {
		for _, p := range list.Items {
			pods[p.Labels[storagev1alpha1.PopulatorClaimNamespaceLabel]+"/"+p.Labels[storagev1alpha1.PopulatorClaimNameLabel]] = p.Status.Phase
		}
	}
	may := s.listable(ctx, u, "", "persistentvolumeclaims")
	for _, c := range claims {
		ref := c.Spec.DataSourceRef
		if ref == nil || ref.Kind != storagev1alpha1.VolumeImageKind {
			continue
		}
		if !may(c.Namespace) {
			hidden = true
			continue
		}
		key := c.Namespace + "/" + c.Name
		f := FillView{Namespace: c.Namespace, Name: c.Name, Image: ref.Name, Node: c.Annotations[selectedNodeAnnotation]}
		f.Stage = fillStage(c, primes[key], pods[key])
		if p := primes[key]; p != nil {
			f.Failures, _ = strconv.Atoi(p.Annotations[storagev1alpha1.PopulatorFailuresAnnotation])
			f.RetryAt = p.Annotations[storagev1alpha1.PopulatorRetryAtAnnotation]
		}
		fills = append(fills, f)
	}
	slices.SortFunc(fills, func(a, b FillView) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return fills, hidden
}

// fillStage names where a claim's fill is, as the populator moves it:
// waiting for its first pod to choose a node, its volume being
// provisioned there, the fill pod running, done.
func fillStage(c *corev1.PersistentVolumeClaim, prime *corev1.PersistentVolumeClaim, pod corev1.PodPhase) string {
	switch {
	case c.Status.Phase == corev1.ClaimBound:
		return "filled"
	case c.Annotations[selectedNodeAnnotation] == "":
		return "waiting for a pod to choose its node"
	case prime == nil || prime.Status.Phase != corev1.ClaimBound:
		return "provisioning its volume"
	case pod == corev1.PodRunning:
		return "filling"
	case pod == corev1.PodSucceeded:
		return "filled; binding"
	case pod == corev1.PodFailed:
		return "failed; waiting to try again"
	}
	return "starting the fill"
}
