package dashboard

import (
	"html/template"
	"strconv"
)

// KustomizationRows draws the Kustomizations' table rows. Like the graph
// (GraphView.SVG) they are written here, not by html/template: 1000 rows
// of some twenty values each took the template 25 ms, escaping each
// value by reflection, and written here a few. Every value from the
// cluster is escaped.
func (g GitOps) KustomizationRows() template.HTML {
	var w markup
	w.Grow(len(g.Kustomizations) * 600)
	for i := range g.Kustomizations {
		kustomizationRow(&w, &g.Kustomizations[i])
	}
	return template.HTML(w.String()) //nolint:gosec // every value in it is escaped above
}

func kustomizationRow(w *markup, v *KustomizationView) {
	w.raw(`<tr class="`)
	if v.State == "Failed" || v.Cycle || v.Protected != "" {
		w.raw("needs-person")
	}
	w.raw(`"`)
	w.attr("data-row", v.Key)
	w.raw(">\n<td>")
	w.text(v.Key)
	w.raw("</td><td>")
	w.text(v.State)
	if v.Reason != "" {
		w.raw(" (")
		w.text(v.Reason)
		w.raw(")")
	}
	if v.Cycle {
		w.raw(` <span class="mark" data-mark="cycle">dependency cycle</span>`)
	}
	w.raw("<br><small>")
	w.text(v.Message)
	w.raw("</small></td>\n<td>")
	w.text(v.Revision)
	w.raw("</td><td>")
	if !v.LastApplied.IsZero() {
		w.raw(v.LastApplied.UTC().Format("2006-01-02 15:04:05Z"))
	}
	w.raw("</td><td>" + strconv.Itoa(v.Inventory) + "</td>\n<td>")
	if v.Protected != "" {
		w.raw(`<span class="mark" data-mark="protected">kept</span> `)
		w.text(v.Protected)
	}
	w.raw("</td>\n" + `<td class="events">`)
	for _, e := range v.Events {
		w.raw(`<p class="event `)
		w.text(e.Type)
		w.raw(`"`)
		w.attr("data-reason", e.Reason)
		w.raw("><small>" + e.At.UTC().Format("15:04:05Z") + "</small> ")
		w.text(e.Reason)
		w.raw(": ")
		w.text(e.Message)
		w.raw("</p>")
	}
	w.raw("</td></tr>\n")
}
