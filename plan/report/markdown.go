package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
)

// DefaultMarkdownLimit keeps a comment under the 65536 characters a
// pull-request comment may hold on the common forges.
const DefaultMarkdownLimit = 60000

// WriteMarkdown writes the pull-request comment: a summary table per risk
// class, the dependency graph as Mermaid with changed Kustomizations
// highlighted, and a collapsible diff per Kustomization. Once limit
// characters are used, the remaining Kustomizations are folded into a count.
func WriteMarkdown(w io.Writer, p *plan.Plan, limit int) error {
	if limit <= 0 {
		limit = DefaultMarkdownLimit
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## strata plan: `%s` → `%s`\n\n", revisionText(p.Base), revisionText(p.Head))
	fmt.Fprintf(&b, "%s\n\n%s\n\n", summaryLine(p), engineLine(p))
	b.WriteString("| risk | changes | what |\n|---|---:|---|\n")
	for _, r := range risk.RiskClasses {
		fmt.Fprintf(&b, "| %s | %d | %s |\n", riskBadge(r), p.Summary.Risk[r], riskMeaning[r])
	}
	writeNeedsAttention(&b, p)
	if warnings := warningsBesides(p); len(warnings) > 0 {
		b.WriteString("\n### Warnings\n\n")
		for _, w := range warnings {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	if len(p.Errors) > 0 {
		b.WriteString("\n### Errors\n\n")
		for _, e := range p.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	b.WriteString("\n### Apply order\n\n")
	writeMermaid(&b, p)
	writeByReason(&b, p, "not-rendered", "Not rendered")
	writeByReason(&b, p, "unknown", "Unknown")
	b.WriteString("\n### Changes\n\n")
	folded := 0
	shownDiffs := map[string]string{}
	for _, ks := range sectionOrder(p) {
		// Diffs go first when room runs out: the list of changed
		// objects with their risks is kept as long as it fits.
		section := kustomizationSection(ks, shownDiffs, true)
		if b.Len()+len(section) > limit-200 {
			section = kustomizationSection(ks, shownDiffs, false)
		}
		if folded > 0 || b.Len()+len(section) > limit-200 {
			folded++
			continue
		}
		b.WriteString(section)
	}
	if folded > 0 {
		fmt.Fprintf(&b, "\n… and %d more Kustomization(s) with changes, not shown to keep this comment under %d characters: run `strata plan` locally for everything.\n", folded, limit)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var riskMeaning = map[string]string{
	risk.DestroysData: "deletes data, opted in with strata.dev/allow-data-loss",
	risk.Recreate:     "immutable field: the apply fails, or with force the object is deleted and created again",
	risk.Disruptive:   "moves a workload's data or node",
	risk.Blocked:      "a deletion the data-loss guard refuses without the opt-in",
	risk.Safe:         "everything else",
}

func riskBadge(r string) string {
	icons := map[string]string{risk.DestroysData: "🔴", risk.Recreate: "🟠", risk.Disruptive: "🟡", risk.Blocked: "⛔", risk.Safe: "🟢"}
	return icons[r] + " " + riskLabel(r)
}

func writeMermaid(b *strings.Builder, p *plan.Plan) {
	shown, changed := mermaidNodes(p)
	if len(shown) == 0 {
		b.WriteString("No Kustomization changes.\n")
		return
	}
	b.WriteString("```mermaid\ngraph LR\n")
	ids := map[string]string{}
	id := func(name string) string {
		if v, ok := ids[name]; ok {
			return v
		}
		ids[name] = fmt.Sprintf("k%d", len(ids))
		return ids[name]
	}
	var highlighted, failed, unknown []string
	for _, ks := range p.Kustomizations {
		name := ks.Namespace + "/" + ks.Name
		if !shown[name] {
			continue
		}
		fmt.Fprintf(b, "  %s[\"%s\"]\n", id(name), name)
		switch {
		case ks.Status == "error":
			failed = append(failed, id(name)) // an error, never counted as a change
		case ks.Status == "unknown":
			unknown = append(unknown, id(name)) // left unjudged by another's failure
		case changed[name]:
			highlighted = append(highlighted, id(name))
		}
	}
	for _, ks := range p.Kustomizations {
		name := ks.Namespace + "/" + ks.Name
		for _, d := range ks.DependsOn {
			if shown[name] && shown[d] {
				fmt.Fprintf(b, "  %s --> %s\n", id(d), id(name))
			}
		}
	}
	if len(highlighted) > 0 {
		b.WriteString("  classDef changed fill:#fde68a,stroke:#b45309\n")
		fmt.Fprintf(b, "  class %s changed\n", strings.Join(highlighted, ","))
	}
	if len(failed) > 0 {
		b.WriteString("  classDef failed fill:#fecaca,stroke:#b91c1c\n")
		fmt.Fprintf(b, "  class %s failed\n", strings.Join(failed, ","))
	}
	if len(unknown) > 0 {
		b.WriteString("  classDef unknown fill:#e5e7eb,stroke:#6b7280,color:#6b7280\n")
		fmt.Fprintf(b, "  class %s unknown\n", strings.Join(unknown, ","))
	}
	b.WriteString("```\n")
}

// mermaidNodes is what the graph shows: the changed Kustomizations and
// those they depend on, directly or not, so that the path to each change
// is there and the other eighty of a large repository are not.
func mermaidNodes(p *plan.Plan) (shown, changed map[string]bool) {
	shown, changed = map[string]bool{}, map[string]bool{}
	deps := map[string][]string{}
	var queue []string
	for _, ks := range p.Kustomizations {
		name := ks.Namespace + "/" + ks.Name
		deps[name] = ks.DependsOn
		if !ks.Quiet() {
			changed[name] = true
			queue = append(queue, name)
		}
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if shown[name] {
			continue
		}
		shown[name] = true
		queue = append(queue, deps[name]...)
	}
	return shown, changed
}

// sectionOrder is the Kustomizations with something to read, parents
// that change other Kustomizations first (a patch of every app explains
// the apps' diffs), then the rest in apply order. Unknown ones are listed
// together by writeByReason, not one empty section each.
func sectionOrder(p *plan.Plan) []plan.Kustomization {
	var parents, rest []plan.Kustomization
	for _, ks := range p.Kustomizations {
		switch {
		case ks.Quiet() || ks.Status == "unknown":
		case changesKustomizations(ks):
			parents = append(parents, ks)
		default:
			rest = append(rest, ks)
		}
	}
	return append(parents, rest...)
}

func changesKustomizations(ks plan.Kustomization) bool {
	for _, ch := range ks.Changes {
		if ch.Object.Kind == "Kustomization" {
			return true
		}
	}
	return false
}

// writeByReason lists the Kustomizations of one status under a heading,
// one line per reason with every Kustomization it holds for.
func writeByReason(b *strings.Builder, p *plan.Plan, status, heading string) {
	var reasons []string
	names := map[string][]string{}
	for _, ks := range p.Kustomizations {
		if ks.Status != status {
			continue
		}
		if _, ok := names[ks.Reason]; !ok {
			reasons = append(reasons, ks.Reason)
		}
		names[ks.Reason] = append(names[ks.Reason], fmt.Sprintf("`%s/%s`", ks.Namespace, ks.Name))
	}
	if len(reasons) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n", heading)
	for _, r := range reasons {
		fmt.Fprintf(b, "- %s: %s\n", listNames(names[r]), r)
	}
}

// listNames names up to ten, and counts the rest.
func listNames(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:10], ", "), len(names)-10)
}

// warningsBesides are the plan's warnings, each once, but those the Not
// rendered list already says.
func warningsBesides(p *plan.Plan) []string {
	said := map[string]bool{}
	for _, ks := range p.Kustomizations {
		if ks.Status == "not-rendered" {
			said[fmt.Sprintf("Kustomization %s/%s: %s", ks.Namespace, ks.Name, ks.Reason)] = true
		}
	}
	var out []string
	for _, w := range p.Warnings {
		if !said[w] {
			said[w] = true
			out = append(out, w)
		}
	}
	return out
}

// kustomizationSection is one Kustomization's collapsible section, with
// its diffs or, short of room, without them. A diff shown already, in
// this section or an earlier one, is named instead of repeated.
func kustomizationSection(ks plan.Kustomization, shownDiffs map[string]string, diffs bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary><b>%s/%s</b> (wave %d): %s</summary>\n\n", ks.Namespace, ks.Name, ks.Wave, kustomizationState(ks))
	writeMarkdownChanges(&b, ks.Changes, shownDiffs, diffs)
	if l := ks.Live; l != nil {
		fmt.Fprintf(&b, "\n**Live cluster**: %s\n\n", liveState(l))
		writeMarkdownChanges(&b, l.Drift, shownDiffs, diffs)
	}
	if !diffs {
		b.WriteString("\n_Diffs left out to keep this comment under its size limit._\n")
	}
	b.WriteString("\n</details>\n\n")
	return b.String()
}

func writeMarkdownChanges(b *strings.Builder, changes []plan.Change, shownDiffs map[string]string, diffs bool) {
	for _, ch := range changes {
		fmt.Fprintf(b, "- %s **%s** `%s`", riskBadge(ch.Risk), ch.Action, ch.Object)
		for _, r := range ch.Reasons {
			fmt.Fprintf(b, "<br>%s", r)
		}
		if ch.OptIn != "" {
			fmt.Fprintf(b, "<br>opt in with `%s`", ch.OptIn)
		}
		b.WriteString("\n")
		if len(ch.Installs) > 0 {
			b.WriteString("\n  what its chart installs changes:\n\n")
			var sub strings.Builder
			writeMarkdownChanges(&sub, ch.Installs, shownDiffs, diffs)
			b.WriteString(indent(sub.String(), "  "))
		}
		if !diffs || ch.Action != plan.Changed || ch.Diff == "" {
			continue
		}
		if first, ok := shownDiffs[ch.Diff]; ok {
			fmt.Fprintf(b, "  the same diff as `%s`\n", first)
			continue
		}
		shownDiffs[ch.Diff] = ch.Object.String()
		fmt.Fprintf(b, "\n```diff\n%s```\n", ch.Diff)
	}
}

// writeNeedsAttention names, at the top and never folded, every change
// that destroys data or that the guard blocks: a reviewer must not have
// to open a collapsed section to find them.
func writeNeedsAttention(b *strings.Builder, p *plan.Plan) {
	var lines []string
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			if ch.Risk == risk.DestroysData || ch.Risk == risk.Blocked {
				lines = append(lines, fmt.Sprintf("- %s `%s` (%s `%s/%s`): %s\n", riskBadge(ch.Risk), ch.Object.String(), ch.Action,
					ks.Namespace, ks.Name, strings.Join(ch.Reasons, "; ")))
			}
		}
	}
	if len(lines) > 0 {
		b.WriteString("\n### Needs attention\n\n" + strings.Join(lines, ""))
	}
}
