package plan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
)

// backups are objects of backup operators in the fixture's apps: two
// kinds strata knows by role, and one it does not.
const backups = `apiVersion: velero.io/v1
kind: Schedule
metadata: {name: nightly, namespace: databases}
spec: {schedule: "0 3 * * *", paused: false, template: {includedNamespaces: [databases]}}
---
apiVersion: postgresql.cnpg.io/v1
kind: ScheduledBackup
metadata: {name: db, namespace: databases}
spec: {schedule: "0 0 0 * * *", cluster: {name: db}}
---
apiVersion: backup.example.com/v1
kind: Policy
metadata: {name: hourly, namespace: databases}
spec: {every: 1h}
`

func runProtected(t *testing.T, r *repo, head string, protectors risk.Protectors) *plan.Plan {
	t.Helper()
	return noErrors(t, planOf(t, r, head, func(o *plan.Options) { o.Protectors = protectors }))
}

// Removing or pausing an object that protects data is disruptive, with
// what it stops, for the kinds strata knows by role and for those a
// repository or a flag adds; an unknown kind stays safe.
func TestDataProtectionKindsByRole(t *testing.T) {
	files := fixture()
	files["apps/backups.yaml"] = backups
	r := newRepo(t, files)
	r.branch("removed", map[string]string{"apps/backups.yaml": ""})
	paused := strings.Replace(strings.Replace(backups, "paused: false", "paused: true", 1), "cluster: {name: db}", "cluster: {name: db}, suspend: true", 1)
	r.branch("paused", map[string]string{"apps/backups.yaml": paused})

	defaults, err := plan.Protectors(r.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	flagged, err := plan.Protectors(r.dir, []string{"backup.example.com/Policy=hourly backups"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, head string
		protectors risk.Protectors
		want       []want
	}{
		{"removed", "removed", defaults, []want{
			{"Schedule.velero.io/databases/nightly", plan.Deleted, risk.Disruptive, "stops the scheduled backups of namespace databases"},
			{"ScheduledBackup.postgresql.cnpg.io/databases/db", plan.Deleted, risk.Disruptive, "stops the scheduled database backups of db (spec.cluster.name)"},
			{"Policy.backup.example.com/databases/hourly", plan.Deleted, risk.Safe, ""}}},
		{"removed, a kind added by flag", "removed", flagged, []want{
			{"Policy.backup.example.com/databases/hourly", plan.Deleted, risk.Disruptive, "stops the hourly backups of namespace databases"}}},
		{"paused", "paused", defaults, []want{
			{"Schedule.velero.io/databases/nightly", plan.Changed, risk.Disruptive, "spec.paused: true pauses the scheduled backups"},
			{"ScheduledBackup.postgresql.cnpg.io/databases/db", plan.Changed, risk.Disruptive, "spec.suspend: true pauses"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWants(t, runProtected(t, r, tc.head, tc.protectors), tc.want)
		})
	}
}

// A repository adds its kinds in .strata-plan.yaml; a file that cannot be
// read stops the plan, naming it, as does a flag without a kind.
func TestDataProtectionKindsFromTheRepository(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, plan.ConfigFile)
	if err := os.WriteFile(file, []byte("dataProtection:\n- {group: backup.example.com, kind: Policy, does: hourly backups, paused: spec.off}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := plan.Protectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps.Sorted() {
		found = found || p.Group == "backup.example.com" && p.Kind == "Policy" && p.Paused == "spec.off"
	}
	if !found || len(ps) != len(risk.DataProtectors)+1 {
		t.Fatalf("the repository's kind is not among %d kinds: %+v", len(ps), ps.Sorted())
	}
	for content, says := range map[string]string{
		"dataProtection: [{group: a, kind: B}]\n": "needs group, kind and does",
		"dataProtection: {}\n":                    plan.ConfigFile,
		"dataProtections: []\n":                   "unknown field",
	} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := plan.Protectors(dir, nil); err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: %v; want an error naming %s and saying %q", content, err, file, says)
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Protectors(dir, []string{"Policy"}); err == nil || !strings.Contains(err.Error(), "GROUP/KIND") {
		t.Errorf("a flag without a group: %v", err)
	}
}
