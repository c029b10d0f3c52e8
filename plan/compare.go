package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/plan/charts"
	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/decrypt"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// Options say what to plan.
type Options struct {
	// RepoDir is a clone of the repository.
	RepoDir string
	// Base and Head are git revisions; Head may be WorkTree.
	Base, Head string
	// Path is where discovery starts, relative to the source root: the
	// path of the bootstrap Kustomization.
	Path string
	// SourceRoot is the directory of RepoDir that the GitRepository
	// serves as its root ("." for a whole repository).
	SourceRoot string
	// Source is the GitRepository that stands for this repository.
	Source graph.Key
	// SubstituteFrom are ConfigMaps and Secrets that postBuild.substituteFrom
	// may read besides the repository's own (--substitute-from).
	SubstituteFrom []*unstructured.Unstructured
	// ChangedOnly renders only Kustomizations whose inputs changed.
	ChangedOnly bool
	// Live, when set, is the cluster to compare the head revision with.
	Live client.Client
	// Protectors are the data-protection kinds; nil: risk.DataProtectors.
	Protectors risk.Protectors
	// Engine is what applies the repository on the cluster; "": what the
	// head revision shows, else Flux (docs/plan.md, "The engine").
	Engine risk.Engine
	// Charts say how HelmReleases' charts are fetched and rendered.
	Charts ChartOptions
	// Decrypter, from --decryption-key-file, decrypts the files of
	// Kustomizations with spec.decryption, so that the plan can say which
	// keys of an encrypted Secret change (never their values); nil keeps
	// them encrypted.
	Decrypter *decrypt.Decrypter
	// SourceDirs are local directories that stand for sources the plan
	// cannot read from Git (an OCIRepository's artifact, a Bucket's
	// objects), by "Kind/namespace/name" (--source-dir): Kustomizations
	// built from one render from its directory, the same on both sides.
	SourceDirs map[string]string
}

// Run renders both revisions and compares them.
func Run(ctx context.Context, o Options) (*Plan, error) {
	repo, closeRepo, err := openRepository(o.RepoDir)
	if err != nil {
		return nil, err
	}
	defer closeRepo()
	root := rootKustomization(o)
	var revealed *decrypt.Plaintexts
	if o.Decrypter != nil {
		o.Decrypter, revealed = o.Decrypter.Recording()
	}
	base, head, err := checkoutSides(ctx, repo, o, root)
	if err != nil {
		return nil, err
	}
	defer base.remove()
	defer head.remove()

	var baseSkip, headSkip func(*kustomizev1.Kustomization) bool
	// A change to the GitRepository's own file rules changes which files
	// every Kustomization reads without changing them: all render.
	if o.ChangedOnly && base.rules.equal(head.rules) {
		baseSkip, headSkip, err = unchangedInputs(repo, o, base, head)
		if err != nil {
			return nil, err
		}
	}
	outside := outsideObjects(o)
	var baseSide, headSide *side
	if baseSkip != nil {
		baseSide = renderSide(ctx, base, root, o.Source, outside, baseSkip)
		headSide = renderSide(ctx, head, root, o.Source, outside, sameAsBase(baseSide, headSkip))
		renderMissing(ctx, baseSide, headSide, o.Source)
	} else {
		done := make(chan struct{})
		go func() {
			baseSide = renderSide(ctx, base, root, o.Source, outside, nil)
			close(done)
		}()
		headSide = renderSide(ctx, head, root, o.Source, outside, nil)
		<-done
	}

	if err := checkSourceUsed(o.Source, root, baseSide, headSide); err != nil {
		return nil, err
	}
	p := &Plan{Schema: Schema, Engine: chooseEngine(o.Engine, headSide), Base: Revision{o.Base, base.commit}, Head: Revision{o.Head, head.commit},
		Summary: Summary{Risk: map[string]int{}}}
	protectors := o.Protectors
	if protectors == nil {
		protectors = risk.NewProtectors()
	}
	c := &comparison{ctx: ctx, base: baseSide, head: headSide, plan: p, live: o.Live, protectors: protectors, engine: p.Engine.Name,
		charts: o.Charts, source: o.Source, rendered: map[string]installs{}}
	if revealed != nil {
		// Both sides are rendered: every value either revealed is known.
		c.mask = newMasker(revealed.Values())
	}
	if !o.Charts.Off {
		c.fetcher, c.fetcherErr = newFetcher(o.Charts, baseSide)
	}
	c.run()
	p.fillLists()
	c.mask.plan(p)
	return p, nil
}

// outsideObjects serves what substituteFrom may read from outside the
// repository: the --substitute-from objects, then, with --kubeconfig, the
// cluster.
func outsideObjects(o Options) client.Reader {
	var rs readers
	if len(o.SubstituteFrom) > 0 {
		file := newRepoObjects()
		file.add(o.SubstituteFrom)
		rs = append(rs, file)
	}
	if o.Live != nil {
		rs = append(rs, o.Live)
	}
	if len(rs) == 0 {
		return nil
	}
	return rs
}

// checkSourceUsed refuses a plan in which every Kustomization found
// under the path is built from another source than --source: it would
// render nothing and pass as "no change".
func checkSourceUsed(source graph.Key, root *kustomizev1.Kustomization, sides ...*side) error {
	found, others := 0, map[string]bool{}
	for _, s := range sides {
		for k := range s.ks {
			if k == keyOfKs(root) {
				continue
			}
			found++
			reason, foreign := s.foreign[k]
			if !foreign {
				return nil
			}
			others[reason] = true
		}
	}
	if found == 0 {
		return nil
	}
	return fmt.Errorf("--source %s: no Kustomization under --path is built from it (%s); set --source to the GitRepository that serves this repository",
		source.Namespace+"/"+source.Name, strings.Join(slices.Sorted(maps.Keys(others)), "; "))
}

// rootKustomization stands for the bootstrap Kustomization: named after
// the source, as `flux bootstrap` names both, applying the start path.
func rootKustomization(o Options) *kustomizev1.Kustomization {
	ks := &kustomizev1.Kustomization{
		TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: metav1.ObjectMeta{Name: o.Source.Name, Namespace: o.Source.Namespace},
		Spec: kustomizev1.KustomizationSpec{Path: o.Path, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: o.Source.Name}},
	}
	return ks
}

// renderMissing renders, on both sides, what a changed-only plan skipped
// on one side but cannot stand for the other: a Kustomization the other
// side rendered (its spec changed), one the other side lacks (unlisted,
// renamed or deleted: its objects are deleted there), and one declared
// by another parent there (its definition moved).
func renderMissing(ctx context.Context, a, b *side, source graph.Key) {
	for _, pair := range [][2]*side{{a, b}, {b, a}} {
		s, other := pair[0], pair[1]
		var missing []*kustomizev1.Kustomization
		for k, r := range s.renders {
			if !r.skipped {
				continue
			}
			or, onBoth := other.renders[k]
			if !onBoth || !or.skipped || s.parent[k] != other.parent[k] {
				missing = append(missing, s.ks[k])
			}
		}
		if len(missing) > 0 {
			s.renderAll(ctx, missing, source, nil)
		}
	}
}

// comparison walks the Kustomizations of both sides in apply order.
type comparison struct {
	ctx        context.Context
	base, head *side
	plan       *Plan
	live       client.Client
	protectors risk.Protectors
	engine     risk.Engine
	// charts, fetcher and rendered serve HelmReleases' charts; source is
	// the planned repository, whose files a chart may come from.
	charts     ChartOptions
	fetcher    *charts.Fetcher
	fetcherErr error
	rendered   map[string]installs
	source     graph.Key
	// owners map each object to the Kustomization rendering it.
	baseOwner, headOwner map[objKey]graph.Key
	// mask hides what SOPS decryption revealed; nil without a key.
	mask *masker
}

// diff is the diff of b and h as printed: with what SOPS revealed masked.
func (c *comparison) diff(b, h *unstructured.Unstructured) string {
	return diff(c.mask.object(b), c.mask.object(h))
}

func (c *comparison) run() {
	c.baseOwner, c.headOwner = owners(c.base), owners(c.head)
	waveOf, blocked := c.waves()
	for _, k := range c.allKeys() {
		entry := c.kustomization(k, waveOf[k], blocked[k])
		c.plan.Kustomizations = append(c.plan.Kustomizations, entry)
	}
	sort.SliceStable(c.plan.Kustomizations, func(i, j int) bool {
		a, b := c.plan.Kustomizations[i], c.plan.Kustomizations[j]
		if (a.Wave == 0) != (b.Wave == 0) {
			return a.Wave != 0
		}
		if a.Wave != b.Wave {
			return a.Wave < b.Wave
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	c.checkFailovers()
	if c.live != nil {
		c.compareLive()
	}
	for _, ks := range c.plan.Kustomizations {
		c.plan.Summary.Unchanged += ks.Unchanged
		if ks.Live != nil {
			c.plan.Summary.Drift += len(ks.Live.Drift)
			for _, ch := range ks.Live.Drift {
				c.plan.Summary.Risk[ch.Risk]++
			}
		}
		for _, ch := range ks.Changes {
			c.plan.Summary.Risk[ch.Risk]++
			switch ch.Action {
			case Created:
				c.plan.Summary.Created++
			case Changed:
				c.plan.Summary.Changed++
			case Deleted:
				c.plan.Summary.Deleted++
			case Orphaned:
				c.plan.Summary.Orphaned++
			}
		}
	}
}

// waves orders the head's Kustomizations as the engine applies them;
// cycles and missing dependencies are plan errors.
func (c *comparison) waves() (map[graph.Key]int, map[graph.Key]string) {
	items := make([]*kustomizev1.Kustomization, 0, len(c.head.ks))
	for _, ks := range c.head.ks {
		items = append(items, ks)
	}
	waves, blocked := graph.Of(items).Waves()
	waveOf := map[graph.Key]int{}
	for i, w := range waves {
		var names []string
		for _, k := range w {
			waveOf[k] = i + 1
			names = append(names, k.String())
		}
		c.plan.Waves = append(c.plan.Waves, names)
	}
	var errs []string
	for k, reason := range blocked {
		errs = append(errs, fmt.Sprintf("Kustomization %s cannot be applied: %s", k, reason))
	}
	sort.Strings(errs)
	c.plan.Errors = append(c.plan.Errors, errs...)
	return waveOf, blocked
}

func (c *comparison) allKeys() []graph.Key {
	seen := map[graph.Key]bool{}
	var keys []graph.Key
	for _, s := range []*side{c.base, c.head} {
		for k := range s.ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

func (c *comparison) kustomization(k graph.Key, wave int, blocked string) Kustomization {
	baseKs, headKs := c.base.ks[k], c.head.ks[k]
	ks := headKs
	if ks == nil {
		ks = baseKs
	}
	out := Kustomization{Namespace: k.Namespace, Name: k.Name, Path: ks.Spec.Path, Wave: wave}
	for _, d := range graph.DependencyKeys(ks) {
		out.DependsOn = append(out.DependsOn, d.String())
	}
	if reason, foreign := c.head.foreign[k]; foreign || (headKs == nil && c.base.foreign[k] != "") {
		if !foreign {
			reason = c.base.foreign[k]
		}
		out.Status, out.Reason, out.Wave = "not-rendered", reason, 0
		return out
	}
	if reason := c.unknownBecause(k); reason != "" {
		out.Status, out.Reason, out.Wave = "unknown", reason, 0
		return out
	}
	baseR, headR := c.base.renders[k], c.head.renders[k]
	if reason := needsCluster(baseKs, baseR, headKs, headR); reason != "" {
		out.Status, out.Reason, out.Wave = "not-rendered", reason, 0
		c.plan.Warnings = append(c.plan.Warnings, fmt.Sprintf("Kustomization %s: %s", k, reason))
		return out
	}
	if err := c.renderError(k, baseKs, baseR, headKs, headR); err != "" {
		out.Status, out.Reason = "error", err
		c.plan.Errors = append(c.plan.Errors, fmt.Sprintf("Kustomization %s: %s", k, err))
		return out
	}
	if blocked != "" {
		// The engine never applies it, so its changes would mislead.
		out.Status, out.Reason = "error", blocked
		return out
	}
	if (baseR != nil && baseR.skipped) || (headR != nil && headR.skipped) {
		out.Status, out.Reason = "skipped", "inputs unchanged, not rendered (--changed-only)"
		return out
	}
	var baseObjs, headObjs []*unstructured.Unstructured
	if baseR != nil {
		baseObjs = baseR.objects
	}
	if headR != nil {
		headObjs = headR.objects
	}
	out.Changes, out.Unchanged = c.objectChanges(k, baseKs, headKs, baseObjs, headObjs)
	switch {
	case baseKs == nil:
		out.Status = "added"
	case headKs == nil:
		out.Status = "removed"
	case len(out.Changes) > 0:
		out.Status = "changed"
	default:
		out.Status = "unchanged"
	}
	return out
}

// needsCluster says why a Kustomization cannot be rendered offline: its
// substituteFrom names a ConfigMap or Secret that the repository does
// not define, on either side. It is then not rendered on either side and
// the rest of the plan stands.
func needsCluster(baseKs *kustomizev1.Kustomization, baseR *rendered, headKs *kustomizev1.Kustomization, headR *rendered) string {
	for _, s := range []struct {
		name string
		ks   *kustomizev1.Kustomization
		r    *rendered
	}{{"base", baseKs, baseR}, {"head", headKs, headR}} {
		if s.r.needsCluster(s.ks) {
			return fmt.Sprintf("postBuild.substituteFrom needs an object the repository does not define (%s: %v); "+
				"supply it with --substitute-from FILE, or read it from the cluster with --kubeconfig", s.name, s.r.err)
		}
	}
	return ""
}

// unknownBecause says why a Kustomization found on one side only cannot be
// judged: a Kustomization above it failed to render on the other side, so
// whether it is still declared there is unknown. It is then neither added
// nor removed, and none of its objects is created or deleted: a broken
// parent never reads as a mass deletion.
func (c *comparison) unknownBecause(k graph.Key) string {
	for _, sides := range []struct {
		have, lack *side
		name       string
	}{{c.base, c.head, "head"}, {c.head, c.base, "base"}} {
		if sides.have.ks[k] == nil || sides.lack.ks[k] != nil {
			continue
		}
		for p, ok := sides.have.parent[k]; ok; p, ok = sides.have.parent[p] {
			if r := sides.lack.renders[p]; r != nil && r.err != nil {
				return fmt.Sprintf("Kustomization %s, which declares it, failed to render on the %s side, so whether it is still declared is unknown; nothing of it is created or deleted", p, sides.name)
			}
		}
	}
	return ""
}

// renderError reports a render failure on either side; the Kustomization
// is then not compared at all, so a failure never reads as deletions.
func (c *comparison) renderError(k graph.Key, baseKs *kustomizev1.Kustomization, baseR *rendered, headKs *kustomizev1.Kustomization, headR *rendered) string {
	for _, s := range []struct {
		name string
		ks   *kustomizev1.Kustomization
		r    *rendered
		snap *snapshot
	}{{"base", baseKs, baseR, c.base.snap}, {"head", headKs, headR, c.head.snap}} {
		if s.ks == nil || s.r == nil || s.r.err == nil {
			continue
		}
		msg := fmt.Sprintf("render failed at %s (%s): %s", s.name, path.Clean(s.ks.Spec.Path), s.snap.relative(s.r.err.Error()))
		if errors.Is(s.r.err, build.ErrPathNotFound) {
			msg += " (for strata plan: spec.path is relative to --source-root, the directory the GitRepository serves)"
		}
		return msg
	}
	return ""
}
