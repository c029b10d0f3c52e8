package controller_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/controller"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	timeout = 30 * time.Second
	release = "20240310T090416Z-28dbdbb"
	mirror  = "mirror.test/buildbarn"
)

var counter atomic.Int32

// start runs the five controllers against the test API server, as
// `strata controller` registers them (from the first component on), with
// Kubernetes' garbage collector, which deletes what a deleted component
// owned and finishes the orphaning deletion of a StatefulSet.
func start(t *testing.T) client.Client {
	env := testenv.Get(t)
	env.GarbageCollector(t)
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return controller.SetupWhenUsed(mgr, mgr.GetEventRecorder("strata-buildbarn"), mirror)
	})
	return env.Client
}

func namespace(t *testing.T, c client.Client) string {
	return testenv.Namespace(t, c, fmt.Sprintf("bb-%d-%d", os.Getpid(), counter.Add(1)))
}

func meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func spec(replicas int32) bbv1.ComponentSpec {
	return bbv1.ComponentSpec{Release: release, Replicas: ptr.To(replicas)}
}

// installation creates a storage of `shards` and a scheduler in ns.
func installation(t *testing.T, c client.Client, ns string, shards int32) {
	t.Helper()
	create(t, c, &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage"), Spec: bbv1.BuildbarnStorageSpec{ComponentSpec: spec(shards)}})
	create(t, c, &bbv1.BuildbarnScheduler{ObjectMeta: meta(ns, "scheduler"), Spec: bbv1.BuildbarnSchedulerSpec{ComponentSpec: spec(1)}})
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

// waitFor polls obj until check passes.
func waitFor[T client.Object](t *testing.T, c client.Client, obj T, check func(T) error) T {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		return check(obj)
	})
	return obj
}

// condition checks a component's condition.
func condition(typ string, status metav1.ConditionStatus, reason string) func(controller.Object) error {
	return func(o controller.Object) error {
		c := apimeta.FindStatusCondition(o.GetConditions(), typ)
		switch {
		case c == nil:
			return fmt.Errorf("%s has no %s condition yet", o.GetName(), typ)
		case c.Status != status || reason != "" && c.Reason != reason:
			return fmt.Errorf("%s: %s is %s (%s: %s), want %s (%s)", o.GetName(), typ, c.Status, c.Reason, c.Message, status, reason)
		case c.ObservedGeneration != o.GetGeneration() || o.GetStatus().ObservedGeneration != o.GetGeneration():
			return fmt.Errorf("%s: status is of generation %d, the object is at %d", o.GetName(), o.GetStatus().ObservedGeneration, o.GetGeneration())
		}
		return nil
	}
}

func all[T any](checks ...func(T) error) func(T) error {
	return func(o T) error {
		for _, c := range checks {
			if err := c(o); err != nil {
				return err
			}
		}
		return nil
	}
}

func state(want string) func(controller.Object) error {
	return func(o controller.Object) error {
		if s := o.GetStatus().State; s != want {
			return fmt.Errorf("%s is %q, want %q", o.GetName(), s, want)
		}
		return nil
	}
}

// waitComponent polls a component until every check passes.
func waitComponent(t *testing.T, c client.Client, obj controller.Object, checks ...func(controller.Object) error) {
	t.Helper()
	waitFor(t, c, obj, all(checks...))
}

// rollOut patches a Deployment's status as the Deployment controller
// would once ready of its pods are up.
func rollOut(t *testing.T, c client.Client, d *appsv1.Deployment, ready int32, conds ...appsv1.DeploymentCondition) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas,
			ReadyReplicas: ready, AvailableReplicas: ready, Conditions: conds}
		return c.Status().Update(context.Background(), d)
	})
}

// wantEvent waits for an event on obj with the reason, saying says.
func wantEvent(t *testing.T, c client.Client, obj client.Object, typ, reason, says string) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		list := &corev1.EventList{}
		if err := c.List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		if slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Name == obj.GetName() && e.Type == typ && e.Reason == reason && strings.Contains(e.Message, says)
		}) {
			return nil
		}
		return fmt.Errorf("no %s %s event on %s saying %q yet", typ, reason, obj.GetName(), says)
	})
}

type (
	controllerObject  = controller.Object
	networkingIngress = networkingv1.Ingress
)

func contains(s, sub string) error {
	if !strings.Contains(s, sub) {
		return fmt.Errorf("%q does not contain %q", s, sub)
	}
	return nil
}

func conditionMessage(o controller.Object, typ string) string {
	if c := apimeta.FindStatusCondition(o.GetConditions(), typ); c != nil {
		return c.Message
	}
	return ""
}

// waitGone waits until obj is no longer there.
func waitGone(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s is still there: %v", obj, obj.GetName(), err)
		}
		return nil
	})
}
