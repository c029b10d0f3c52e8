package v1alpha1_test

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/api/volsync/v1alpha1"
)

// A repository's VolSync objects for VolSync's own movers keep every
// field when strata's types read and write them.
func TestOtherMoversAreKeptAsWritten(t *testing.T) {
	in := `apiVersion: volsync.backube/v1alpha1
kind: ReplicationSource
metadata:
  name: db-backup
spec:
  restic:
    copyMethod: Snapshot
    repository: restic-config
    retain:
      daily: 7
  sourcePVC: db
  trigger:
    schedule: 0 * * * *
`
	var rs v1alpha1.ReplicationSource
	if err := yaml.UnmarshalStrict([]byte(in), &rs); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(&rs)
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	_ = yaml.Unmarshal([]byte(in), &want)
	_ = yaml.Unmarshal(out, &got)
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) != string(g) {
		t.Fatalf("read and written again:\n%s\nwant\n%s", out, in)
	}
}
