package plan_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/plan/report"
)

// A root that fails to render on the head side leaves every Kustomization
// below it unknown: the comment names the failure in one section, lists
// the unknown ones on one line, and draws only the failed one red (the
// unknown grey). Defect 6 of issue #42.
func TestARootFailureIsOneSection(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("broken", map[string]string{"clusters/homelab/broken.yaml": "kind: [not yaml\n"})
	p := run(t, r, "broken", false)
	var md, text bytes.Buffer
	if err := report.WriteMarkdown(&md, p, 0); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	if n := strings.Count(out, "<details>"); n != 1 {
		t.Errorf("%d sections, want the failed root's alone:\n%s", n, out)
	}
	if n := strings.Count(out, "failed to render on the head side"); n != 1 {
		t.Errorf("the unknown Kustomizations' reason is written %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "### Unknown") {
		t.Errorf("no list of the unknown Kustomizations:\n%s", out)
	}
	failed := regexp.MustCompile(`(?m)^  class (\S+) failed$`).FindStringSubmatch(out)
	if failed == nil || strings.Contains(failed[1], ",") {
		t.Errorf("the graph draws %v red, want the failed root alone:\n%s", failed, out)
	}
	if !strings.Contains(out, "class ") || !strings.Contains(out, " unknown\n") {
		t.Errorf("the graph does not grey the unknown Kustomizations:\n%s", out)
	}
	if n := strings.Count(text.String(), "failed to render on the head side"); n != 1 {
		t.Errorf("the text output writes the unknown reason %d times, want once:\n%s", n, text.String())
	}
}

// A Kustomization that substitutes from a Secret only the cluster holds
// is said once, and the text does not stutter "not-rendered: not
// rendered:". Defect 6 of issue #42.
func TestAClusterOnlySubstitutionIsSaidOnce(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("subst", edit(t, "clusters/homelab/monitoring.yaml", "  path: ./monitoring\n",
		"  path: ./monitoring\n  postBuild:\n    substituteFrom:\n    - {kind: Secret, name: cluster-secrets}\n"))
	p := run(t, r, "subst", false)
	var md, text bytes.Buffer
	_ = report.WriteMarkdown(&md, p, 0)
	_ = report.WriteText(&text, p, false)
	if n := strings.Count(md.String(), "--substitute-from FILE"); n != 1 {
		t.Errorf("the markdown gives the cluster-only substitution %d times, want once:\n%s", n, md.String())
	}
	if strings.Contains(text.String(), "not rendered: not rendered") || strings.Contains(text.String(), "not-rendered: not rendered") {
		t.Errorf("the text stutters:\n%s", text.String())
	}
}

// Under --markdown-limit the parent that changes its children's
// Kustomizations is kept before any child's diff, and a diff that several
// objects share is shown once. Defect 5 of issue #42.
func TestMarkdownLimitKeepsTheParentAndFoldsIdenticalDiffs(t *testing.T) {
	files := fixture()
	head := map[string]string{}
	const apps = 8
	for i := 1; i <= apps; i++ {
		ks := fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: app-%d, namespace: flux-system}
spec:
  interval: 10m
  path: ./app-%d
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`, i, i)
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: app-%d}\ndata:\n  a: \"1\"\n  b: \"2\"\n  c: \"3\"\n  level: info\n  x: \"1\"\n  y: \"2\"\n  z: \"3\"\n", i)
		files[fmt.Sprintf("clusters/homelab/app-%d.yaml", i)] = ks
		files[fmt.Sprintf("app-%d/settings.yaml", i)] = cm
		head[fmt.Sprintf("clusters/homelab/app-%d.yaml", i)] = strings.Replace(ks, "interval: 10m", "interval: 5m", 1)
		head[fmt.Sprintf("app-%d/settings.yaml", i)] = strings.Replace(cm, "level: info", "level: debug", 1)
	}
	r := newRepo(t, files)
	r.branch("patch", head)
	p := run(t, r, "patch", false)
	var full bytes.Buffer
	_ = report.WriteMarkdown(&full, p, 0)
	out := full.String()
	if n := strings.Count(out, "+  level: debug"); n != 1 {
		t.Errorf("the shared diff is shown %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "the same diff as `ConfigMap/app-1/settings`"); n != apps-1 {
		t.Errorf("%d changes point to the shared diff, want %d:\n%s", n, apps-1, out)
	}
	root := strings.Index(out, "<b>flux-system/flux-system</b>")
	child := strings.Index(out, "<b>flux-system/app-1</b>")
	if root < 0 || child >= 0 && child < root {
		t.Errorf("the parent's section (at %d) is not before its children's (at %d):\n%s", root, child, out)
	}
	var tight bytes.Buffer
	limit := strings.Index(out, "### Changes") + 1500
	_ = report.WriteMarkdown(&tight, p, limit)
	if !strings.Contains(tight.String(), "<b>flux-system/flux-system</b>") {
		t.Errorf("at %d characters the parent's section is folded:\n%s", limit, tight.String())
	}
}
