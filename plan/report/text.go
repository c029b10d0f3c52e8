// Package report writes a plan for people: the text a terminal shows and
// the markdown of a pull-request comment. The plan itself (package plan)
// is the comparison of two revisions, with its JSON form; its risk
// classes are plan/risk's.
package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
)

// colours for a terminal; empty when writing to a file or a pipe.
type palette struct{ red, yellow, green, cyan, bold, reset string }

var ansi = palette{"\x1b[31m", "\x1b[33m", "\x1b[32m", "\x1b[36m", "\x1b[1m", "\x1b[0m"}

// WriteText writes the terminal report, coloured when color is set.
func WriteText(w io.Writer, p *plan.Plan, color bool) error {
	c := palette{}
	if color {
		c = ansi
	}
	riskColour := map[string]string{risk.DestroysData: c.red, risk.Recreate: c.red, risk.Blocked: c.yellow, risk.Disruptive: c.yellow, risk.Safe: c.green}
	var b strings.Builder
	fmt.Fprintf(&b, "%sstrata plan%s: %s → %s\n\n", c.bold, c.reset, revisionText(p.Base), revisionText(p.Head))
	fmt.Fprintf(&b, "%s\n", summaryLine(p))
	fmt.Fprintf(&b, "%s\n", engineLine(p))
	wave := -1
	for _, ks := range p.Kustomizations {
		if ks.Status == "unknown" {
			continue // listed together, by reason, below
		}
		if ks.Wave != wave {
			wave = ks.Wave
			if wave == 0 {
				fmt.Fprintf(&b, "\n%sNot applied in a wave%s\n", c.bold, c.reset)
			} else {
				fmt.Fprintf(&b, "\n%sWave %d%s\n", c.bold, wave, c.reset)
			}
		}
		fmt.Fprintf(&b, "  %s%s/%s%s  %s  %s\n", c.cyan, ks.Namespace, ks.Name, c.reset, ks.Path, kustomizationState(ks))
		writeTextChanges(&b, ks.Changes, "    ", c, riskColour)
		if l := ks.Live; l != nil {
			fmt.Fprintf(&b, "    %slive%s: %s\n", c.bold, c.reset, liveState(l))
			writeTextChanges(&b, l.Drift, "      ", c, riskColour)
		}
	}
	writeUnknownText(&b, p, c)
	if len(p.Errors) > 0 {
		fmt.Fprintf(&b, "\n%sErrors%s\n", c.red+c.bold, c.reset)
		for _, e := range p.Errors {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintf(&b, "\n%sWarnings%s\n", c.yellow+c.bold, c.reset)
		for _, e := range p.Warnings {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTextChanges(b *strings.Builder, changes []plan.Change, pad string, c palette, riskColour map[string]string) {
	for _, ch := range changes {
		fmt.Fprintf(b, "%s%s %-8s %s  %s[%s]%s\n", pad, actionMark[ch.Action], ch.Action, ch.Object, riskColour[ch.Risk], riskLabel(ch.Risk), c.reset)
		detail := pad + "    "
		for _, r := range ch.Reasons {
			fmt.Fprintf(b, "%s%s\n", detail, r)
		}
		if ch.OptIn != "" {
			fmt.Fprintf(b, "%sopt in with the annotation %s on the object or its Kustomization\n", detail, ch.OptIn)
		}
		if ch.MovedFrom != "" {
			fmt.Fprintf(b, "%smoved from Kustomization %s\n", detail, ch.MovedFrom)
		}
		if ch.Action == plan.Changed && ch.Diff != "" {
			fmt.Fprintf(b, "%s\n", colourDiff(indent(ch.Diff, detail), c))
		}
		if len(ch.Installs) > 0 {
			fmt.Fprintf(b, "%swhat its chart installs changes:\n", detail)
			writeTextChanges(b, ch.Installs, detail+"  ", c, riskColour)
		}
	}
}

// liveState sums up the comparison with the cluster in words.
func liveState(l *plan.Live) string {
	s := l.Status
	if l.Revision != "" {
		s += ", last applied " + l.Revision
	}
	if l.Reason != "" {
		s += "; " + l.Reason
	}
	if l.Status == "compared" {
		s += fmt.Sprintf("; %d drifted object(s)", len(l.Drift))
	}
	return s
}

var actionMark = map[string]string{plan.Created: "+", plan.Changed: "~", plan.Deleted: "-", plan.Orphaned: "!"}

func riskLabel(r string) string {
	if r == risk.Blocked {
		return "BLOCKED"
	}
	return r
}

// writeUnknownText lists the Kustomizations another's failure left
// unjudged, one line per reason.
func writeUnknownText(b *strings.Builder, p *plan.Plan, c palette) {
	var reasons []string
	names := map[string][]string{}
	for _, ks := range p.Kustomizations {
		if ks.Status != "unknown" {
			continue
		}
		if _, ok := names[ks.Reason]; !ok {
			reasons = append(reasons, ks.Reason)
		}
		names[ks.Reason] = append(names[ks.Reason], ks.Namespace+"/"+ks.Name)
	}
	if len(reasons) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%sUnknown%s\n", c.bold, c.reset)
	for _, r := range reasons {
		fmt.Fprintf(b, "  %s: %s\n", listNames(names[r]), r)
	}
}

// engineLine says which engine deletions were judged for, and why.
func engineLine(p *plan.Plan) string {
	if p.Engine.Name == "" {
		return ""
	}
	return fmt.Sprintf("Judged for the %s engine (%s).", p.Engine.Name, p.Engine.Reason)
}

func revisionText(r plan.Revision) string {
	if r.Commit == "" {
		return r.Ref
	}
	return fmt.Sprintf("%s (%s)", r.Ref, r.Commit[:min(12, len(r.Commit))])
}

func summaryLine(p *plan.Plan) string {
	s := p.Summary
	var risks []string
	for _, r := range risk.RiskClasses {
		if n := s.Risk[r]; n > 0 {
			risks = append(risks, fmt.Sprintf("%d %s", n, riskLabel(r)))
		}
	}
	line := fmt.Sprintf("%d to create, %d to change, %d to delete, %d orphaned, %d unchanged", s.Created, s.Changed, s.Deleted, s.Orphaned, s.Unchanged)
	if s.Drift > 0 {
		line += fmt.Sprintf(", %d drifted in the cluster", s.Drift)
	}
	if len(risks) > 0 {
		line += "; risk: " + strings.Join(risks, ", ")
	}
	return line
}

func kustomizationState(ks plan.Kustomization) string {
	switch ks.Status {
	case "error", "not-rendered", "unknown":
		return ks.Status + ": " + ks.Reason
	case "unchanged":
		return "no changes"
	case "skipped":
		return "skipped: " + ks.Reason
	}
	s := fmt.Sprintf("%s: %d object change(s)", ks.Status, len(ks.Changes))
	if ks.Reason != "" {
		s += "; " + ks.Reason
	}
	return s
}

func colourDiff(s string, c palette) string {
	if c.reset == "" {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		switch {
		case strings.HasPrefix(t, "+++"), strings.HasPrefix(t, "---"):
		case strings.HasPrefix(t, "+"):
			lines[i] = c.green + l + c.reset
		case strings.HasPrefix(t, "-"):
			lines[i] = c.red + l + c.reset
		}
	}
	return strings.Join(lines, "\n")
}

// indent puts prefix before every line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
