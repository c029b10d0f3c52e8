package apply

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func workload(t *testing.T, ns, kind, name, claim string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	doc := fmt.Sprintf(`apiVersion: apps/v1
kind: %s
metadata: {name: %s, namespace: %s}
spec:
  template:
    spec:
      containers: [{name: app, image: example-app}]
      volumes:
        - {name: data, persistentVolumeClaim: {claimName: %s}}
        - {name: scratch, emptyDir: {}}
`, kind, name, ns, claim)
	if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

func claimOf(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
	claim, _, _ := unstructured.NestedString(volumes[0].(map[string]any), "persistentVolumeClaim", "claimName")
	return claim
}

// While a Failover runs its app on the backup, the workload from Git is
// applied with the backup claim; other workloads, and the same one once
// the Failover is back on its primary, keep Git's claim.
func TestAFailedOverWorkloadKeepsItsBackupClaim(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := fmt.Sprintf("apply-fo-%d", os.Getpid())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "notes"}, Spec: failoverv1alpha1.FailoverSpec{
		Workload:    failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: "notes"},
		Primary:     failoverv1alpha1.Side{Node: "a", Claim: "db"},
		Backup:      failoverv1alpha1.Side{Node: "b", Claim: "db-backup"},
		Replication: failoverv1alpha1.ReplicationReference{Source: "db", Destination: "db-backup"},
	}}
	if err := env.Client.Create(ctx, fo); err != nil {
		t.Fatal(err)
	}
	fo.Status.Active = failoverv1alpha1.ActiveBackup
	if err := env.Client.Status().Update(ctx, fo); err != nil {
		t.Fatal(err)
	}
	notes, other, set := workload(t, ns, "Deployment", "notes", "db"), workload(t, ns, "Deployment", "wiki", "db"),
		workload(t, ns, "StatefulSet", "notes", "db")
	if err := keepFailoverSwitch(ctx, env.Client, []*unstructured.Unstructured{notes, other, set}); err != nil {
		t.Fatal(err)
	}
	if got := claimOf(t, notes); got != "db-backup" {
		t.Errorf("the failed-over Deployment is applied with claim %s, want db-backup", got)
	}
	if claimOf(t, other) != "db" || claimOf(t, set) != "db" {
		t.Errorf("workloads the Failover does not name changed claims: %s, %s", claimOf(t, other), claimOf(t, set))
	}

	fo.Status.Active = failoverv1alpha1.ActivePrimary
	if err := env.Client.Status().Update(ctx, fo); err != nil {
		t.Fatal(err)
	}
	notes = workload(t, ns, "Deployment", "notes", "db")
	if err := keepFailoverSwitch(ctx, env.Client, []*unstructured.Unstructured{notes}); err != nil {
		t.Fatal(err)
	}
	if got := claimOf(t, notes); got != "db" {
		t.Errorf("after failback the Deployment is applied with claim %s, want Git's db", got)
	}
}
