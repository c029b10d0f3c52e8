package dashboard

import (
	"slices"
	"strings"

	"github.com/strata-gitops/strata/engine/graph"
)

// GraphView is the dependency graph laid out for an SVG drawn by the
// server: one column per wave (the order the engine applies), the
// Kustomizations that cannot be applied (a cycle, a missing dependency)
// in a last column of their own.
type GraphView struct {
	Width, Height int
	Nodes         []GraphNode
	Edges         []GraphEdge
}

// GraphNode is one Kustomization's box.
type GraphNode struct {
	Key, State string
	X, Y       int
	Cycle      bool
}

// GraphEdge is a dependsOn: from the dependency to its dependent; Cycle
// marks one inside a cycle.
type GraphEdge struct {
	From, To       string
	X1, Y1, X2, Y2 int
	Cycle          bool
}

// The boxes' size and the gaps between them.
const (
	boxWidth, boxHeight = 200, 36
	colGap, rowGap      = 60, 16
)

func drawGraph(g graph.Graph, waves [][]graph.Key, blocked map[graph.Key]string, views []KustomizationView) GraphView {
	var stuck []graph.Key
	for k := range blocked {
		stuck = append(stuck, k)
	}
	sortKeys(stuck)
	columns := append(waves, stuck)
	byKey := map[string]KustomizationView{}
	for _, v := range views {
		byKey[v.Key] = v
	}
	at := map[graph.Key][2]int{}
	var out GraphView
	for col, keys := range columns {
		for row, k := range keys {
			x, y := col*(boxWidth+colGap), row*(boxHeight+rowGap)
			at[k] = [2]int{x, y}
			v := byKey[k.String()]
			out.Nodes = append(out.Nodes, GraphNode{Key: k.String(), State: v.State, X: x, Y: y, Cycle: v.Cycle})
			out.Width, out.Height = max(out.Width, x+boxWidth), max(out.Height, y+boxHeight)
		}
	}
	for k, deps := range g {
		to, ok := at[k]
		if !ok {
			continue
		}
		for _, d := range deps {
			from, ok := at[d]
			if !ok {
				continue // a missing dependency has no box
			}
			out.Edges = append(out.Edges, GraphEdge{From: d.String(), To: k.String(), X1: from[0] + boxWidth, Y1: from[1] + boxHeight/2, X2: to[0], Y2: to[1] + boxHeight/2,
				Cycle: byKey[k.String()].Cycle && byKey[d.String()].Cycle})
		}
	}
	return out
}

func sortKeys(keys []graph.Key) {
	slices.SortFunc(keys, func(a, b graph.Key) int { return strings.Compare(a.String(), b.String()) })
}
