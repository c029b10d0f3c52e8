package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/strata-gitops/strata/engine/plan"
	"github.com/strata-gitops/strata/engine/plan/risk"
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
	if len(p.Warnings) > 0 {
		b.WriteString("\n### Warnings\n\n")
		for _, w := range p.Warnings {
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
	var foreign []string
	for _, ks := range p.Kustomizations {
		if ks.Status == "not-rendered" {
			foreign = append(foreign, fmt.Sprintf("- `%s/%s`: %s\n", ks.Namespace, ks.Name, ks.Reason))
		}
	}
	if len(foreign) > 0 {
		b.WriteString("\n### Not rendered\n\n" + strings.Join(foreign, ""))
	}
	b.WriteString("\n### Changes\n\n")
	folded := 0
	for _, ks := range p.Kustomizations {
		if ks.Quiet() {
			continue
		}
		// Diffs go first when room runs out: the list of changed
		// objects with their risks is kept as long as it fits.
		section := kustomizationSection(ks, true)
		if b.Len()+len(section) > limit-200 {
			section = kustomizationSection(ks, false)
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
	var highlighted, failed []string
	for _, ks := range p.Kustomizations {
		name := ks.Namespace + "/" + ks.Name
		if !shown[name] {
			continue
		}
		fmt.Fprintf(b, "  %s[\"%s\"]\n", id(name), name)
		switch {
		case ks.Status == "error" || ks.Status == "unknown":
			failed = append(failed, id(name)) // an error, never counted as a change
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

// kustomizationSection is one Kustomization's collapsible section, with
// its diffs or, short of room, without them.
func kustomizationSection(ks plan.Kustomization, diffs bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary><b>%s/%s</b> (wave %d): %s</summary>\n\n", ks.Namespace, ks.Name, ks.Wave, kustomizationState(ks))
	writeMarkdownChanges(&b, ks.Changes, diffs)
	if l := ks.Live; l != nil {
		fmt.Fprintf(&b, "\n**Live cluster**: %s\n\n", liveState(l))
		writeMarkdownChanges(&b, l.Drift, diffs)
	}
	if !diffs {
		b.WriteString("\n_Diffs left out to keep this comment under its size limit._\n")
	}
	b.WriteString("\n</details>\n\n")
	return b.String()
}

func writeMarkdownChanges(b *strings.Builder, changes []plan.Change, diffs bool) {
	for _, ch := range changes {
		fmt.Fprintf(b, "- %s **%s** `%s`", riskBadge(ch.Risk), ch.Action, ch.Object)
		for _, r := range ch.Reasons {
			fmt.Fprintf(b, "<br>%s", r)
		}
		if ch.OptIn != "" {
			fmt.Fprintf(b, "<br>opt in with `%s`", ch.OptIn)
		}
		b.WriteString("\n")
		if diffs && ch.Action == plan.Changed && ch.Diff != "" {
			fmt.Fprintf(b, "\n```diff\n%s```\n", ch.Diff)
		}
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
