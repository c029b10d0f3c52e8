// Package graph orders Kustomizations by their dependsOn edges: it finds
// cycles (named as "a -> b -> a"), missing dependencies, and the waves in
// which the engine applies them.
package graph

import (
	"fmt"
	"sort"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Key names a Kustomization.
type Key = types.NamespacedName

// Graph maps each Kustomization to the ones it depends on.
type Graph map[Key][]Key

// DependencyKeys resolves a Kustomization's dependsOn, defaulting each
// namespace to the Kustomization's own, as Flux does.
func DependencyKeys(ks *kustomizev1.Kustomization) []Key {
	keys := make([]Key, 0, len(ks.Spec.DependsOn))
	for _, d := range ks.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = ks.Namespace
		}
		keys = append(keys, Key{Namespace: ns, Name: d.Name})
	}
	return keys
}

// Of builds the graph of a set of Kustomizations. It takes pointers so
// that a cache's own objects are read where they are, not copied.
func Of(items []*kustomizev1.Kustomization) Graph {
	g := make(Graph, len(items))
	for _, ks := range items {
		g[Key{Namespace: ks.Namespace, Name: ks.Name}] = DependencyKeys(ks)
	}
	return g
}

// CycleThrough returns the cycle that start is part of, as a path that
// begins and ends at start, or nil. Only members of a cycle are returned a
// cycle: a Kustomization that merely depends on one waits instead.
func (g Graph) CycleThrough(start Key) []Key {
	visited := map[Key]bool{}
	var path []Key
	var walk func(k Key) bool
	walk = func(k Key) bool {
		path = append(path, k)
		for _, dep := range g[k] {
			if dep == start {
				path = append(path, dep)
				return true
			}
			if !visited[dep] {
				visited[dep] = true
				if walk(dep) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if walk(start) {
		return path
	}
	return nil
}

// FormatCycle renders a cycle as "ns/a -> ns/b -> ns/a", dropping the
// namespace when every member shares it.
func FormatCycle(cycle []Key) string {
	same := true
	for _, k := range cycle {
		same = same && k.Namespace == cycle[0].Namespace
	}
	names := make([]string, len(cycle))
	for i, k := range cycle {
		if same {
			names[i] = k.Name
		} else {
			names[i] = k.String()
		}
	}
	return strings.Join(names, " -> ")
}

// Waves groups the Kustomizations into the order the engine applies them:
// each wave depends only on earlier waves. Members of cycles, and
// everything that depends on them or on a missing Kustomization, are left
// out and returned as blocked, with the reason.
func (g Graph) Waves() (waves [][]Key, blocked map[Key]string) {
	blocked = map[Key]string{}
	for k := range g {
		if c := g.CycleThrough(k); c != nil {
			blocked[k] = "dependency cycle: " + FormatCycle(c)
		}
	}
	for k, deps := range g {
		for _, d := range deps {
			if _, ok := g[d]; !ok {
				blocked[k] = fmt.Sprintf("dependency '%s' not found", d)
			}
		}
	}
	wave := map[Key]int{}
	var depth func(k Key, seen map[Key]bool) (int, bool)
	depth = func(k Key, seen map[Key]bool) (int, bool) {
		if w, ok := wave[k]; ok {
			return w, true
		}
		if _, bad := blocked[k]; bad || seen[k] {
			return 0, false
		}
		seen[k] = true
		w := 0
		for _, d := range g[k] {
			dw, ok := depth(d, seen)
			if !ok {
				blocked[k] = fmt.Sprintf("waits for '%s', which cannot be applied", d)
				return 0, false
			}
			w = max(w, dw+1)
		}
		wave[k] = w
		return w, true
	}
	for k := range g {
		depth(k, map[Key]bool{})
	}
	for k, w := range wave {
		for len(waves) <= w {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], k)
	}
	for _, ws := range waves {
		sort.Slice(ws, func(i, j int) bool { return ws[i].String() < ws[j].String() })
	}
	return waves, blocked
}

// Dependents returns the Kustomizations that list k in dependsOn.
func (g Graph) Dependents(k Key) []Key {
	var out []Key
	for from, deps := range g {
		for _, d := range deps {
			if d == k {
				out = append(out, from)
			}
		}
	}
	return out
}
