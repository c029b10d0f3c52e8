package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// `strata failover back` asks for the failback of a failed-over app, and
// refuses, changing nothing, one that runs on its primary.
func TestFailoverBack(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := fmt.Sprintf("cli-fo-%d", os.Getpid())
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.KubeconfigFile(t)
	for _, name := range []string{"on-backup", "on-primary"} {
		fo := &failoverv1alpha1.Failover{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: failoverv1alpha1.FailoverSpec{
			Workload:    failoverv1alpha1.WorkloadReference{Kind: "Deployment", Name: name},
			Primary:     failoverv1alpha1.Side{Node: "a", Claim: "db"},
			Backup:      failoverv1alpha1.Side{Node: "b", Claim: "db-backup"},
			Replication: failoverv1alpha1.ReplicationReference{Source: "db", Destination: "db-backup"},
		}}
		if err := env.Client.Create(ctx, fo); err != nil {
			t.Fatal(err)
		}
		fo.Status.Active = failoverv1alpha1.ActivePrimary
		if name == "on-backup" {
			fo.Status.Active = failoverv1alpha1.ActiveBackup
		}
		if err := env.Client.Status().Update(ctx, fo); err != nil {
			t.Fatal(err)
		}
	}
	back := func(name string) (string, error) {
		cmd := failoverCommand()
		var out bytes.Buffer
		cmd.SetArgs([]string{"back", name, "-n", ns, "--kubeconfig", kubeconfig})
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage = true
		err := cmd.Execute()
		return out.String(), err
	}
	annotation := func(name string) string {
		fo := &failoverv1alpha1.Failover{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fo); err != nil {
			t.Fatal(err)
		}
		return fo.Annotations[controller.AnnotationFailback]
	}
	if out, err := back("on-backup"); err != nil || !strings.Contains(out, "failback asked for") || annotation("on-backup") != "true" {
		t.Fatalf("failover back of a failed-over app: %q, %v, annotation %q", out, err, annotation("on-backup"))
	}
	if _, err := back("on-primary"); err == nil || !strings.Contains(err.Error(), "nothing to move back") || annotation("on-primary") != "" {
		t.Fatalf("failover back of an app on its primary: %v, annotation %q", err, annotation("on-primary"))
	}
	if _, err := back("missing"); err == nil || !strings.Contains(err.Error(), "failover "+ns+"/missing") {
		t.Fatalf("failover back of a missing Failover: %v", err)
	}
}
