package dashboard

import (
	"html/template"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-gitops/strata/reconciler/graph"
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

// SVG draws the laid-out graph. It is written here, not by html/template:
// a graph of 1000 Kustomizations is some 16,000 values, and the
// template's escaping of each by reflection was most of the GitOps page's
// time. Every value from the cluster is escaped as html/template escapes
// text, which is safe in the text and the double-quoted attributes it
// goes in.
func (g GraphView) SVG() template.HTML {
	if len(g.Nodes) == 0 {
		return ""
	}
	var w markup
	w.Grow(len(g.Nodes)*220 + len(g.Edges)*140)
	w.raw(`<svg class="graph" role="img" aria-label="the Kustomizations' dependsOn graph"`)
	w.number("width", g.Width)
	w.number("height", g.Height)
	w.raw(` viewBox="0 0 ` + strconv.Itoa(g.Width) + " " + strconv.Itoa(g.Height) + `">` + "\n")
	for _, e := range g.Edges {
		w.raw(`<line class="edge`)
		if e.Cycle {
			w.raw(" cycle")
		}
		w.raw(`"`)
		w.attr("data-from", e.From)
		w.attr("data-to", e.To)
		w.number("x1", e.X1)
		w.number("y1", e.Y1)
		w.number("x2", e.X2)
		w.number("y2", e.Y2)
		w.raw("></line>\n")
	}
	for _, n := range g.Nodes {
		w.raw(`<g class="ks `)
		w.text(n.State)
		if n.Cycle {
			w.raw(" cycle")
		}
		w.raw(`"`)
		w.attr("data-ks", n.Key)
		w.attr("data-state", n.State)
		if n.Cycle {
			w.raw(` data-cycle="true"`)
		}
		w.raw(">\n<rect")
		w.number("x", n.X)
		w.number("y", n.Y)
		w.raw(` width="` + strconv.Itoa(boxWidth) + `" height="` + strconv.Itoa(boxHeight) + `" rx="4"></rect><text`)
		w.number("x", n.X)
		w.number("y", n.Y)
		w.raw(` dx="8" dy="23">`)
		w.text(n.Key)
		w.raw("</text></g>\n")
	}
	w.raw("</svg>")
	return template.HTML(w.String()) //nolint:gosec // every value in it is escaped above
}
