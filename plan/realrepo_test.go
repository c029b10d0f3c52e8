package plan_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/report"
	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// TestChangedOnlySkipsPathsWithSchemaComments: most public repositories
// begin their kustomization files with a yaml-language-server schema
// comment; its URL is no remote base, so an untouched path is skipped.
func TestChangedOnlySkipsPathsWithSchemaComments(t *testing.T) {
	files := fixture()
	files["monitoring/kustomization.yaml"] = "# yaml-language-server: $schema=https://json.schemastore.org/kustomization\n" +
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- dashboards.yaml\n"
	r := newRepo(t, files)
	r.branch("bump", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"))
	status := map[string]string{}
	for _, ks := range run(t, r, "bump", true).Kustomizations {
		status[ks.Name] = ks.Status
	}
	if status["monitoring"] != "skipped" {
		t.Fatalf("monitoring, untouched and with a schema comment, is %q in a changed-only plan (all: %v); want skipped", status["monitoring"], status)
	}
}

// TestASourceThatMatchesNothingIsAnError: a --source that no Kustomization
// under the path is built from would render nothing and pass as "no
// change"; it is an error that names the sources in use.
func TestASourceThatMatchesNothingIsAnError(t *testing.T) {
	r := newRepo(t, fixture())
	_, err := plan.Run(context.Background(), plan.Options{
		RepoDir: r.dir, Base: "main", Head: "main", Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "not-this-repository"},
	})
	if err == nil || !strings.Contains(err.Error(), "--source flux-system/not-this-repository") {
		t.Fatalf("plan with a source nothing uses = %v, want an error naming --source", err)
	}
}

// TestWorktreeWithARelativeOrInnerRepo: --repo may be "." or any directory
// inside the clone; the working tree is still read from the clone's top.
func TestWorktreeWithARelativeOrInnerRepo(t *testing.T) {
	r := newRepo(t, fixture())
	for name, content := range edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi") {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(r.dir)
	for _, repoDir := range []string{".", "apps"} {
		p, err := plan.Run(context.Background(), plan.Options{
			RepoDir: repoDir, Base: "main", Head: plan.WorkTree, Path: "./clusters/homelab", SourceRoot: ".",
			Source: graph.Key{Namespace: "flux-system", Name: "flux-system"},
		})
		if err != nil {
			t.Fatalf("--repo %s: %v", repoDir, err)
		}
		if len(p.Errors) > 0 || p.Summary.Deleted > 0 || p.Summary.Changed != 1 {
			t.Fatalf("--repo %s: errors %v, %d deleted, %d changed; want the one uncommitted change", repoDir, p.Errors, p.Summary.Deleted, p.Summary.Changed)
		}
	}
}

// TestABrokenParentDeletesNothing: a YAML error in one ks.yaml makes the
// Kustomization that holds it fail to render; the Kustomizations it
// declared are then unknown on the head side, not removed, and nothing of
// theirs is deleted.
func TestABrokenParentDeletesNothing(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("broken", map[string]string{"clusters/homelab/monitoring.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: [unclosed\n"})
	p := run(t, r, "broken", false)
	if len(p.Errors) == 0 {
		t.Fatal("a plan over a broken ks.yaml reports no error")
	}
	if p.Summary.Deleted != 0 {
		t.Fatalf("a broken parent reads as %d deletions", p.Summary.Deleted)
	}
	// Paths are the repository's, not the checkout's temporary directory,
	// so the PR comment is the same on every run.
	for _, e := range p.Errors {
		if strings.Contains(e, "strata-plan-") || strings.Contains(e, os.TempDir()) {
			t.Errorf("error names the checkout's temporary directory: %s", e)
		}
	}
	unknown := 0
	for _, ks := range p.Kustomizations {
		if ks.Status == "removed" {
			t.Errorf("Kustomization %s/%s is removed below a parent that failed to render", ks.Namespace, ks.Name)
		}
		if ks.Status == "unknown" {
			unknown++
		}
	}
	if unknown == 0 {
		t.Fatalf("no Kustomization is reported unknown: %+v", p.Kustomizations)
	}
	// In the comment the broken Kustomization is an error, not a change.
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md, p, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "failed\n") || strings.Contains(md.String(), " changed\n```") {
		t.Errorf("the graph shows the broken Kustomization as changed:\n%s", md.String())
	}
}

// TestASubstitutionFromTheClusterIsNotRendered: a substituteFrom of a
// ConfigMap the repository does not define (one made at bootstrap) leaves
// that Kustomization not rendered, on both sides, with a warning; the rest
// of the plan stands and sets the exit code. --substitute-from supplies
// the object and the Kustomization renders.
func TestASubstitutionFromTheClusterIsNotRendered(t *testing.T) {
	r := newRepo(t, fixture())
	files := edit(t, "infrastructure/namespaces.yaml", "name: cluster-vars", "name: other-vars")
	r.commit("the vars move to the cluster", files)
	r.branch("bump", edit(t, "monitoring/dashboards.yaml", "dashboards", "dashboards-v2"))
	p := run(t, r, "bump", false)
	status := map[string]plan.Kustomization{}
	for _, ks := range p.Kustomizations {
		status[ks.Name] = ks
	}
	if apps := status["apps"]; apps.Status != "not-rendered" || !strings.Contains(apps.Reason, "--substitute-from") {
		t.Fatalf("apps is %q (%q), want not-rendered saying how to supply the object", apps.Status, apps.Reason)
	}
	if len(p.Errors) > 0 || !strings.Contains(strings.Join(p.Warnings, "\n"), "cluster-vars") {
		t.Fatalf("errors %q, warnings %q; want no error and a warning naming cluster-vars", p.Errors, p.Warnings)
	}
	if code := p.ExitCode("changes"); code != plan.ExitChanges {
		t.Fatalf("exit %d, want %d from the rest of the plan", code, plan.ExitChanges)
	}
	vars := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cluster-vars", "namespace": "flux-system"}, "data": map[string]any{"region": "eu-1"}}}
	p, err := plan.Run(context.Background(), plan.Options{
		RepoDir: r.dir, Base: "main", Head: "bump", Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}, SubstituteFrom: []*unstructured.Unstructured{vars},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ks := range p.Kustomizations {
		if ks.Name == "apps" && ks.Status == "not-rendered" {
			t.Fatalf("apps is still not rendered with --substitute-from: %s", ks.Reason)
		}
	}
}

// TestStorageAwareness: changes that lose data later or move an app off
// its data, and removals that stop replication, get a class a reviewer
// cannot miss.
func TestStorageAwareness(t *testing.T) {
	files := fixture()
	files["apps/stateful.yaml"] = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
  namespace: databases
spec:
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: web-data}
`
	files["apps/release.yaml"] = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: gitea
  namespace: databases
spec:
  interval: 1h
  chart: {spec: {chart: gitea, sourceRef: {kind: HelmRepository, name: gitea}}}
  values:
    persistence: {enabled: true, existingClaim: gitea-data}
`
	files["apps/backup.yaml"] = `apiVersion: volsync.backube/v1alpha1
kind: ReplicationSource
metadata:
  name: db-backup
  namespace: databases
spec:
  sourcePVC: db-data
`
	r := newRepo(t, files)
	retention := editIn(t, files, "apps/stateful.yaml", "  serviceName: web\n", "  serviceName: web\n  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}\n")
	templates := editIn(t, files, "apps/stateful.yaml", "      volumes:\n        - name: data\n          persistentVolumeClaim: {claimName: web-data}\n",
		"  volumeClaimTemplates:\n    - metadata: {name: data}\n      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n")
	r.branch("retention", retention)
	r.branch("templates", templates)
	r.branch("chart", editIn(t, files, "apps/release.yaml", "existingClaim: gitea-data", "existingClaim: gitea-data-new"))
	r.branch("backup", map[string]string{"apps/backup.yaml": ""})
	for _, tc := range []struct {
		head, object, risk, reason string
	}{
		{"retention", "StatefulSet.apps/databases/web", risk.DestroysData, "whenDeleted becomes Delete"},
		{"templates", "StatefulSet.apps/databases/web", risk.Disruptive, "new, empty volumes"},
		{"chart", "HelmRelease.helm.toolkit.fluxcd.io/databases/gitea", risk.Disruptive, "existing claims change"},
		{"backup", "ReplicationSource.volsync.backube/databases/db-backup", risk.Disruptive, "stops the replication or backups"},
	} {
		ch, ok := findChange(run(t, r, tc.head, false), tc.object)
		if !ok || ch.Risk != tc.risk || !strings.Contains(strings.Join(ch.Reasons, "; "), tc.reason) {
			t.Errorf("%s: %s is %+v, want %s saying %q", tc.head, tc.object, ch, tc.risk, tc.reason)
		}
	}
}

// TestKindsOfOneNameInTwoGroupsAreToldApart: rows name the API group, so
// two changed Certificates of different operators read as two objects.
func TestKindsOfOneNameInTwoGroupsAreToldApart(t *testing.T) {
	files := fixture()
	cert := func(apiVersion, host string) string {
		return "apiVersion: " + apiVersion + "\nkind: Certificate\nmetadata:\n  name: web\n  namespace: databases\nspec:\n  host: " + host + "\n"
	}
	files["apps/cert-a.yaml"] = cert("cert-manager.io/v1", "a.example")
	files["apps/cert-b.yaml"] = cert("certs.example.com/v1", "a.example")
	r := newRepo(t, files)
	r.branch("hosts", map[string]string{"apps/cert-a.yaml": cert("cert-manager.io/v1", "b.example"), "apps/cert-b.yaml": cert("certs.example.com/v1", "b.example")})
	p := run(t, r, "hosts", false)
	var text bytes.Buffer
	if err := report.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	for _, object := range []string{"Certificate.cert-manager.io/databases/web", "Certificate.certs.example.com/databases/web"} {
		if _, ok := findChange(p, object); !ok || !strings.Contains(text.String(), object) {
			t.Errorf("%s not a change of its own (found %v):\n%s", object, ok, text.String())
		}
	}
}

// TestChangedOnlyFollowsASharedComponent: a Kustomization whose build
// uses a component outside its path is skipped while nothing it reads
// changed, and rendered (with the same changes as a full plan) when the
// shared component changes.
func TestChangedOnlyFollowsASharedComponent(t *testing.T) {
	files := fixture()
	files["monitoring/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- dashboards.yaml\ncomponents:\n- ../components/common\n"
	component := func(level string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common\n  namespace: flux-system\ndata:\n  level: \"" + level + "\"\n"
	}
	files["components/common/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n- common.yaml\n"
	files["components/common/common.yaml"] = component("1")
	r := newRepo(t, files)
	r.branch("bump", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"))
	r.branch("shared", map[string]string{"components/common/common.yaml": component("2")})
	statusOf := func(p *plan.Plan) map[string]string {
		status := map[string]string{}
		for _, ks := range p.Kustomizations {
			status[ks.Name] = ks.Status
		}
		return status
	}
	if s := statusOf(run(t, r, "bump", true)); s["monitoring"] != "skipped" {
		t.Errorf("monitoring, whose files and component are untouched, is %q in a changed-only plan (all: %v); want skipped", s["monitoring"], s)
	}
	changedOnly := run(t, r, "shared", true)
	if s := statusOf(changedOnly); s["monitoring"] == "skipped" {
		t.Errorf("monitoring was skipped though its shared component changed")
	}
	if got, want := changesOf(changedOnly), changesOf(run(t, r, "shared", false)); got != want || !strings.Contains(got, "ConfigMap/flux-system/common") {
		t.Errorf("changed-only changes:\n%s\nfull plan:\n%s\nwant the same, with ConfigMap common changed", got, want)
	}
}
