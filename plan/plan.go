// Package plan compares what two revisions of a cluster repository make
// the engine apply, Kustomization by Kustomization in the order the
// engine applies them, and says which changes destroy data, need a
// delete-and-recreate, or move workloads. It renders with the engine's
// own build code and judges deletions with the engine's data-loss guard.
package plan

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/strata-gitops/strata/plan/risk"
)

// Schema identifies the JSON output's layout; it changes only when a
// field changes meaning or disappears.
const Schema = "strata.dev/plan/v1"

// Actions.
const (
	Created  = "created"
	Changed  = "changed"
	Deleted  = "deleted"
	Orphaned = "orphaned"
)

// Plan is the result, and the JSON output.
type Plan struct {
	Schema string `json:"schema"`
	// Engine is what the plan judged deletions for, and why.
	Engine         EngineChoice    `json:"engine"`
	Base           Revision        `json:"base"`
	Head           Revision        `json:"head"`
	Summary        Summary         `json:"summary"`
	Waves          [][]string      `json:"waves"`
	Kustomizations []Kustomization `json:"kustomizations"`
	Errors         []string        `json:"errors"`
	// Warnings are what the plan could not judge offline, such as a
	// Kustomization that needs a cluster object to render; they do not
	// change the exit code.
	Warnings []string `json:"warnings,omitempty"`
}

// EngineChoice is the engine the plan judges for (--engine) and how it
// was chosen.
type EngineChoice struct {
	Name   risk.Engine `json:"name"`
	Reason string      `json:"reason"`
}

// Revision is one side.
type Revision struct {
	Ref    string `json:"ref"`
	Commit string `json:"commit,omitempty"`
}

// Summary counts the changes by action and by risk.
type Summary struct {
	Created   int `json:"created"`
	Changed   int `json:"changed"`
	Deleted   int `json:"deleted"`
	Orphaned  int `json:"orphaned"`
	Unchanged int `json:"unchanged"`
	// Drift counts the changes found only against the live cluster.
	Drift int            `json:"drift"`
	Risk  map[string]int `json:"risk"`
}

// Kustomization is one Kustomization's part of the plan.
type Kustomization struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Path      string `json:"path,omitempty"`
	// Wave is the 1-based apply wave; 0 when it cannot be applied
	// (cycle, missing dependency) or is not rendered.
	Wave int `json:"wave"`
	// Status: "changed", "unchanged", "added", "removed", "error",
	// "not-rendered", "skipped" (--changed-only: inputs unchanged),
	// "unknown" (on one side only, below a Kustomization that failed to
	// render on the other).
	Status    string   `json:"status"`
	Reason    string   `json:"reason,omitempty"`
	DependsOn []string `json:"dependsOn,omitempty"`
	Changes   []Change `json:"changes,omitempty"`
	Unchanged int      `json:"unchanged"`
	// Live is set with --kubeconfig.
	Live *Live `json:"live,omitempty"`
}

// Live is the running cluster's side of a Kustomization.
type Live struct {
	// Status: "compared"; "absent" when the cluster has no such
	// Kustomization yet; "error" when the comparison failed (Reason).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Revision is the revision the cluster last applied.
	Revision string `json:"lastAppliedRevision,omitempty"`
	// Drift lists what applying the head revision does to the cluster
	// beyond the offline plan, because the cluster does not hold the base
	// revision's objects as Git has them.
	Drift []Change `json:"drift,omitempty"`
}

// Quiet says the Kustomization has nothing for a reviewer to read.
func (ks Kustomization) Quiet() bool {
	drift := ks.Live != nil && (len(ks.Live.Drift) > 0 || ks.Live.Status == "error")
	return !drift && (ks.Status == "unchanged" || ks.Status == "skipped" || ks.Status == "not-rendered")
}

// Change is one object's change.
type Change struct {
	Action string    `json:"action"`
	Object ObjectRef `json:"object"`
	Risk   string    `json:"risk"`
	// Reasons say in words why the change has its risk class.
	Reasons []string `json:"reasons"`
	// OptIn is the annotation a blocked deletion needs.
	OptIn string `json:"optIn,omitempty"`
	// MovedFrom names the Kustomization that applied the object before.
	MovedFrom string `json:"movedFrom,omitempty"`
	Diff      string `json:"diff,omitempty"`
	// Installs are what a HelmRelease's change does to the objects its
	// chart installs, rendered on both sides.
	Installs []Change `json:"installs,omitempty"`
}

// ObjectRef names an object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// String names the object as Kind.group/namespace/name, the group left out
// for the core group as kubectl does, so that two kinds of one name in
// different groups (a Certificate of cert-manager and of another operator)
// are told apart in every row.
func (o ObjectRef) String() string {
	kind := o.Kind
	if group := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind).Group; group != "" {
		kind += "." + group
	}
	if o.Namespace == "" {
		return kind + "/" + o.Name
	}
	return kind + "/" + o.Namespace + "/" + o.Name
}

// Destructive reports whether the plan destroys data, recreates objects,
// or tries to delete data the guard keeps: a change whose intent is to
// delete data stops a --fail-on destructive gate even though the cluster
// would keep the data.
func (p *Plan) Destructive() bool {
	return p.Summary.Risk[risk.DestroysData] > 0 || p.Summary.Risk[risk.Recreate] > 0 || p.Summary.Risk[risk.Blocked] > 0
}

// HasChanges reports whether anything would be applied or deleted.
func (p *Plan) HasChanges() bool {
	s := p.Summary
	return s.Created+s.Changed+s.Deleted+s.Orphaned+s.Drift > 0
}

// Exit codes of strata plan.
const (
	ExitNoChange    = 0
	ExitChanges     = 1
	ExitDestructive = 2
	ExitError       = 3
)

// ExitCode is the exit code for failOn (never, changes or destructive):
// an error always gives ExitError; under "destructive", changes that are
// not destructive give ExitNoChange.
func (p *Plan) ExitCode(failOn string) int {
	switch {
	case len(p.Errors) > 0:
		return ExitError
	case failOn == "never" || !p.HasChanges():
		return ExitNoChange
	case failOn == "destructive" && p.Destructive():
		return ExitDestructive
	case failOn == "destructive":
		return ExitNoChange
	}
	return ExitChanges
}

// fillLists makes every list of the JSON output a list, empty rather than
// null, so that a consumer never has to tell null from none.
// once is the list without repeats, in its order.
func once(list []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(list, func(s string) bool {
		if seen[s] {
			return true
		}
		seen[s] = true
		return false
	})
}

func (p *Plan) fillLists() {
	if p.Errors == nil {
		p.Errors = []string{}
	}
	// Each once: one cause, such as a missing Secret, is met on both sides.
	p.Warnings, p.Errors = once(p.Warnings), once(p.Errors)
	fill := func(changes []Change) {
		for i := range changes {
			if changes[i].Reasons == nil {
				changes[i].Reasons = []string{}
			}
		}
	}
	for i := range p.Kustomizations {
		fill(p.Kustomizations[i].Changes)
		if l := p.Kustomizations[i].Live; l != nil {
			fill(l.Drift)
		}
	}
}
