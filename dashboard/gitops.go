package dashboard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/reconciler/graph"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// GitOps is the engine's page: the Kustomizations' dependency graph,
// each Kustomization's state, and the GitRepositories.
type GitOps struct {
	Graph          GraphView
	Kustomizations []KustomizationView
	Repositories   []RepositoryView
	Hidden         bool
	At             time.Time
}

// KustomizationView is one Kustomization.
type KustomizationView struct {
	Key                     string
	State, Reason, Message  string
	Revision                string
	LastApplied             time.Time
	Inventory               int
	Protected               string
	Suspended, Cycle, Stuck bool
	// Events are its latest, newest first.
	Events []EventView
}

// RepositoryView is one GitRepository.
type RepositoryView struct {
	Key, URL, Revision, Ready string
	Size                      int64
}

// kustomizationState names how a Kustomization stands, as the graph
// colours it: Ready, Reconciling, Failed, or Suspended.
func kustomizationState(ks *kustomizev1.Kustomization) (state, reason, message string) {
	if ks.Spec.Suspend {
		return "Suspended", "", "suspended"
	}
	if c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
		return "Reconciling", c.Reason, c.Message
	}
	c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	switch {
	case c == nil:
		return "Reconciling", "", "not reconciled yet"
	case c.Status == metav1.ConditionTrue:
		return "Ready", c.Reason, c.Message
	}
	return "Failed", c.Reason, c.Message
}

func (s *Server) gitOpsOf(ctx context.Context, u User) (GitOps, error) {
	out := GitOps{At: s.now()}
	all, err := stored[kustomizev1.Kustomization](ctx, s.Reader, &kustomizev1.KustomizationList{})
	if err != nil {
		return out, err
	}
	may := s.listable(ctx, u, kustomizev1.GroupVersion.Group, "kustomizations")
	visible := slices.DeleteFunc(all, func(ks *kustomizev1.Kustomization) bool { return !may(ks.Namespace) })
	out.Hidden = len(visible) < len(all)
	g := graph.Of(visible)
	waves, blocked := g.Waves()
	events, err := stored[corev1.Event](ctx, s.Reader, &corev1.EventList{})
	if err != nil {
		return out, err
	}
	latest := latestEvents(events)
	out.Kustomizations = make([]KustomizationView, 0, len(visible))
	for _, ks := range visible {
		v := kustomizationView(ks, g, blocked)
		v.Events = latest[v.Key]
		out.Kustomizations = append(out.Kustomizations, v)
	}
	slices.SortFunc(out.Kustomizations, func(a, b KustomizationView) int { return strings.Compare(a.Key, b.Key) })
	out.Graph = drawGraph(g, waves, blocked, out.Kustomizations)
	repos, err := s.repositories(ctx, u)
	out.Repositories = repos
	return out, err
}

// cyclePrefix begins reconciler/graph's reason for a Kustomization in a
// dependency cycle.
const cyclePrefix = "dependency cycle"

func kustomizationView(ks *kustomizev1.Kustomization, g graph.Graph, blocked map[graph.Key]string) KustomizationView {
	key := graph.Key{Namespace: ks.Namespace, Name: ks.Name}
	v := KustomizationView{Key: key.String(), Revision: ks.Status.LastAppliedRevision, Suspended: ks.Spec.Suspend}
	v.State, v.Reason, v.Message = kustomizationState(ks)
	if c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
		v.LastApplied = c.LastTransitionTime.Time
	}
	if ks.Status.Inventory != nil {
		v.Inventory = len(ks.Status.Inventory.Entries)
	}
	if c := apimeta.FindStatusCondition(ks.Status.Conditions, kustomization.DataProtectedCondition); c != nil && c.Status == metav1.ConditionTrue {
		v.Protected = c.Message
	}
	// Waves found the cycles already: the graph is walked again only for
	// a blocked box whose reason names another cause first.
	why, stuck := blocked[key]
	v.Cycle, v.Stuck = strings.HasPrefix(why, cyclePrefix) || (stuck && g.CycleThrough(key) != nil), stuck
	return v
}

// repositories are the GitRepositories of the namespaces u may list
// GitRepositories in.
func (s *Server) repositories(ctx context.Context, u User) ([]RepositoryView, error) {
	var repos sourcev1.GitRepositoryList
	if err := s.Reader.List(ctx, &repos, readOnly); err != nil {
		return nil, err
	}
	var out []RepositoryView
	may := s.listable(ctx, u, sourcev1.GroupVersion.Group, "gitrepositories")
	for _, r := range repos.Items {
		if !may(r.Namespace) {
			continue
		}
		v := RepositoryView{Key: r.Namespace + "/" + r.Name, URL: r.Spec.URL, Ready: "Unknown"}
		if a := r.Status.Artifact; a != nil {
			v.Revision = a.Revision
			if a.Size != nil {
				v.Size = *a.Size
			}
		}
		if c := apimeta.FindStatusCondition(r.Status.Conditions, meta.ReadyCondition); c != nil {
			v.Ready = fmt.Sprintf("%s: %s", c.Status, c.Reason)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b RepositoryView) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
