package dashboard

import (
	"html"
	"strconv"
	"strings"
)

// markup writes HTML by hand for the parts of a page drawn thousands of
// times, where html/template's escaping by reflection costs the most:
// markup is written as is, values from the cluster only escaped.
type markup struct{ strings.Builder }

// raw writes the page's own markup: never a value from the cluster.
func (m *markup) raw(s string) { m.WriteString(s) }

// text writes a value escaped: <, >, &, ' and " become references, as
// html/template writes text, safe in an element's text and in a
// double-quoted attribute.
func (m *markup) text(s string) { m.WriteString(html.EscapeString(s)) }

// attr writes ` name="value"`, the value escaped.
func (m *markup) attr(name, value string) {
	m.raw(" " + name + `="`)
	m.text(value)
	m.raw(`"`)
}

// number writes ` name="n"`.
func (m *markup) number(name string, n int) {
	m.raw(" " + name + `="`)
	var digits [20]byte
	m.Write(strconv.AppendInt(digits[:0], int64(n), 10))
	m.raw(`"`)
}
