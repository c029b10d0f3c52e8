package controller_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/controller"
	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// subject is one kind under test: how to make one, and what it runs.
type subject struct {
	kind     string
	make     func(ns string, c bbv1.ComponentSpec) controller.Object
	ports    []int32 // its Service's, none without one
	stateful bool
}

var subjects = []subject{
	{kind: "BuildbarnStorage", stateful: true, ports: []int32{8981},
		make: func(ns string, c bbv1.ComponentSpec) controller.Object {
			return &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage"), Spec: bbv1.BuildbarnStorageSpec{ComponentSpec: c}}
		}},
	{kind: "BuildbarnScheduler", ports: []int32{8982, 8983, 7982},
		make: func(ns string, c bbv1.ComponentSpec) controller.Object {
			return &bbv1.BuildbarnScheduler{ObjectMeta: meta(ns, "scheduler"), Spec: bbv1.BuildbarnSchedulerSpec{ComponentSpec: c}}
		}},
	{kind: "BuildbarnFrontend", ports: []int32{8980},
		make: func(ns string, c bbv1.ComponentSpec) controller.Object {
			return &bbv1.BuildbarnFrontend{ObjectMeta: meta(ns, "frontend"), Spec: bbv1.BuildbarnFrontendSpec{ComponentSpec: c}}
		}},
	{kind: "BuildbarnBrowser", ports: []int32{7984},
		make: func(ns string, c bbv1.ComponentSpec) controller.Object {
			return &bbv1.BuildbarnBrowser{ObjectMeta: meta(ns, "browser"), Spec: bbv1.BuildbarnBrowserSpec{ComponentSpec: c}}
		}},
	{kind: "BuildbarnWorker",
		make: func(ns string, c bbv1.ComponentSpec) controller.Object {
			return &bbv1.BuildbarnWorker{ObjectMeta: meta(ns, "worker"), Spec: bbv1.BuildbarnWorkerSpec{ComponentSpec: c,
				WorkerExtras: bbv1.WorkerExtras{RunnerImage: "mirror.test/ubuntu:22.04", Concurrency: 2}}}
		}},
}

// Every kind goes through every state: refused (NotFound, Stalled), made
// and rolling out (NotReady, Progressing), rolled out (Ready), failing
// (Degraded), and a spec change rolls again; what it makes is owned by
// it and wired as its kind needs.
func TestEachKindGoesThroughEveryState(t *testing.T) {
	c := start(t)
	for _, sub := range subjects {
		t.Run(sub.kind, func(t *testing.T) {
			ns := namespace(t, c)
			if sub.kind != "BuildbarnStorage" {
				create(t, c, subjects[0].make(ns, spec(1)))
			}
			if sub.kind != "BuildbarnStorage" && sub.kind != "BuildbarnScheduler" {
				create(t, c, subjects[1].make(ns, spec(1)))
			}
			unpinned := spec(2)
			unpinned.Release, unpinned.Image = "", "mirror.test/buildbarn/thing:latest"
			obj := sub.make(ns, unpinned)
			create(t, c, obj)
			waitComponent(t, c, obj, state(bbv1.StateNotFound), condition(bbv1.ConditionReady, metav1.ConditionFalse, "ImageNotPinned"),
				condition("Stalled", metav1.ConditionTrue, "ImageNotPinned"), condition(bbv1.ConditionDegraded, metav1.ConditionTrue, "ImageNotPinned"))
			wantEvent(t, c, obj, corev1.EventTypeWarning, "Refused", ":latest is refused")

			testenv.Update(t, c, obj, func(o controller.Object) { o.GetComponent().Image, o.GetComponent().Release = "", release })
			waitComponent(t, c, obj, state(bbv1.StateNotReady), condition(bbv1.ConditionProgressing, metav1.ConditionTrue, "RollingOut"),
				condition("Reconciling", metav1.ConditionTrue, ""), condition(bbv1.ConditionReady, metav1.ConditionFalse, "RollingOut"))
			checkOwned(t, c, sub, obj)

			markReady(t, c, sub, obj, 2, nil)
			waitComponent(t, c, obj, state(bbv1.StateReady), condition(bbv1.ConditionReady, metav1.ConditionTrue, "RolledOut"),
				condition(bbv1.ConditionProgressing, metav1.ConditionFalse, "RolledOut"), condition(bbv1.ConditionDegraded, metav1.ConditionFalse, ""),
				func(o controller.Object) error {
					if s := o.GetStatus(); s.Version != release || s.Replicas != 2 || s.ReadyReplicas != 2 || s.Image == "" {
						return fmt.Errorf("status says %+v", s)
					}
					return nil
				})
			wantEvent(t, c, obj, corev1.EventTypeNormal, "Created", "created ConfigMap "+obj.GetName()+"-config")

			if !sub.stateful {
				failed := appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota exceeded"}
				markReady(t, c, sub, obj, 1, &failed)
				waitComponent(t, c, obj, state(bbv1.StateNotReady), condition(bbv1.ConditionDegraded, metav1.ConditionTrue, "WorkloadFailing"))
			}

			testenv.Update(t, c, obj, func(o controller.Object) {
				o.GetComponent().Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
			})
			waitComponent(t, c, obj, state(bbv1.StateNotReady), condition(bbv1.ConditionProgressing, metav1.ConditionTrue, "RollingOut"))
			wantEvent(t, c, obj, corev1.EventTypeNormal, "Updated", "changed")

			// Deleted, it takes what it made with it.
			if err := c.Delete(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
			var workload client.Object = &appsv1.Deployment{ObjectMeta: meta(ns, obj.GetName())}
			if sub.stateful {
				workload = &appsv1.StatefulSet{ObjectMeta: meta(ns, obj.GetName())}
			}
			waitGone(t, c, workload)
			waitGone(t, c, &corev1.ConfigMap{ObjectMeta: meta(ns, obj.GetName()+"-config")})
		})
	}
}

// markReady patches the kind's workload status as its controller would
// with ready pods up, and an optional failure.
func markReady(t *testing.T, c client.Client, sub subject, obj controller.Object, ready int32, failure *appsv1.DeploymentCondition) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	if !sub.stateful {
		var conds []appsv1.DeploymentCondition
		if failure != nil {
			conds = append(conds, *failure)
		}
		rollOut(t, c, &appsv1.Deployment{ObjectMeta: meta(key.Namespace, key.Name)}, ready, conds...)
		return
	}
	testenv.Eventually(t, timeout, func() error {
		ss := &appsv1.StatefulSet{}
		if err := c.Get(context.Background(), key, ss); err != nil {
			return err
		}
		n := *ss.Spec.Replicas
		ss.Status = appsv1.StatefulSetStatus{ObservedGeneration: ss.Generation, Replicas: n, ReadyReplicas: ready, UpdatedReplicas: n, CurrentReplicas: n, AvailableReplicas: ready}
		return c.Status().Update(context.Background(), ss)
	})
}

// checkOwned: every object made is the component's, so it goes with it,
// and its Service serves the kind's ports and the diagnostics port is on
// the pods.
func checkOwned(t *testing.T, c client.Client, sub subject, obj controller.Object) {
	t.Helper()
	ctx, key := context.Background(), client.ObjectKeyFromObject(obj)
	var workload client.Object = &appsv1.Deployment{}
	if sub.stateful {
		workload = &appsv1.StatefulSet{}
	}
	owned := []client.Object{workload, &corev1.ConfigMap{}}
	if len(sub.ports) > 0 {
		owned = append(owned, &corev1.Service{})
	}
	for _, o := range owned {
		k := key
		if _, ok := o.(*corev1.ConfigMap); ok {
			k.Name += "-config"
		}
		if err := c.Get(ctx, k, o); err != nil {
			t.Fatalf("%T %s: %v", o, k.Name, err)
		}
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.UID != obj.GetUID() || ref.Kind != sub.kind {
			t.Errorf("%T %s is not controlled by its %s: %v", o, k.Name, sub.kind, ref)
		}
	}
	if len(sub.ports) > 0 {
		svc := owned[2].(*corev1.Service)
		var ports []int32
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Port)
		}
		if fmt.Sprint(ports) != fmt.Sprint(sub.ports) {
			t.Errorf("Service %s serves %v, want %v", svc.Name, ports, sub.ports)
		}
	}
	tmpl := podTemplate(workload)
	if tmpl.Annotations[objects.ConfigHashAnnotation] == "" || tmpl.Annotations["prometheus.io/port"] != "9980" {
		t.Errorf("the pod template's annotations are %v", tmpl.Annotations)
	}
	if last := tmpl.Spec.Containers[0].Ports[len(tmpl.Spec.Containers[0].Ports)-1]; last.ContainerPort != 9980 {
		t.Errorf("the pods have no diagnostics port: %v", tmpl.Spec.Containers[0].Ports)
	}
}

func podTemplate(workload client.Object) corev1.PodTemplateSpec {
	if ss, ok := workload.(*appsv1.StatefulSet); ok {
		return ss.Spec.Template
	}
	return workload.(*appsv1.Deployment).Spec.Template
}
