package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Adding a shard changes every client's configuration: the frontend's
// ConfigMap names it, and the new hash on its pod template rolls it.
func TestAnAddedShardRollsTheClients(t *testing.T) {
	c := start(t)
	ns := namespace(t, c)
	installation(t, c, ns, 1)
	fe := &bbv1.BuildbarnFrontend{ObjectMeta: meta(ns, "frontend"), Spec: bbv1.BuildbarnFrontendSpec{ComponentSpec: spec(1)}}
	create(t, c, fe)
	before := waitFor(t, c, &appsv1.Deployment{ObjectMeta: meta(ns, "frontend")}, func(*appsv1.Deployment) error { return nil }).Spec.Template.Annotations[objects.ConfigHashAnnotation]
	testenv.Update(t, c, &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage")}, func(s *bbv1.BuildbarnStorage) { s.Spec.Replicas = ptr.To[int32](2) })
	waitFor(t, c, &corev1.ConfigMap{ObjectMeta: meta(ns, "frontend-config")}, func(cm *corev1.ConfigMap) error {
		return contains(cm.Data["frontend.json"], "storage-1.storage."+ns+":8981")
	})
	d := waitFor(t, c, &appsv1.Deployment{ObjectMeta: meta(ns, "frontend")}, func(d *appsv1.Deployment) error {
		if d.Spec.Template.Annotations[objects.ConfigHashAnnotation] == before {
			return fmt.Errorf("the pod template still has the config hash %s", before)
		}
		return nil
	})
	waitComponent(t, c, fe, func(o controllerObject) error {
		if h := o.GetStatus().ConfigHash; h != d.Spec.Template.Annotations[objects.ConfigHashAnnotation] {
			return fmt.Errorf("status.configHash %s is not the template's", h)
		}
		return nil
	})
}

// A user's ConfigMap replaces the generated one: refused while missing,
// then mounted and hashed, and a change to it rolls the pods.
func TestAUsersConfigMapReplacesTheGeneratedOne(t *testing.T) {
	c := start(t)
	ns := namespace(t, c)
	installation(t, c, ns, 1)
	br := &bbv1.BuildbarnBrowser{ObjectMeta: meta(ns, "browser"), Spec: bbv1.BuildbarnBrowserSpec{ComponentSpec: spec(1)}}
	create(t, c, br)
	waitFor(t, c, &corev1.ConfigMap{ObjectMeta: meta(ns, "browser-config")}, func(*corev1.ConfigMap) error { return nil })
	testenv.Update(t, c, br, func(b *bbv1.BuildbarnBrowser) { b.Spec.ConfigMapName = "mine" })
	waitComponent(t, c, br, condition(bbv1.ConditionReady, metav1.ConditionFalse, "ConfigMapNotFound"))

	mine := &corev1.ConfigMap{ObjectMeta: meta(ns, "mine"), Data: map[string]string{"browser.json": `{"httpServers": []}`}}
	create(t, c, mine)
	check := func(data map[string]string) {
		waitFor(t, c, &appsv1.Deployment{ObjectMeta: meta(ns, "browser")}, func(d *appsv1.Deployment) error {
			tmpl := d.Spec.Template
			if name := tmpl.Spec.Volumes[0].ConfigMap.Name; name != "mine" || tmpl.Annotations[objects.ConfigHashAnnotation] != objects.Hash(data) {
				return fmt.Errorf("the pods mount ConfigMap %s with hash %s", name, tmpl.Annotations[objects.ConfigHashAnnotation])
			}
			return nil
		})
	}
	check(mine.Data)
	waitGone(t, c, &corev1.ConfigMap{ObjectMeta: meta(ns, "browser-config")})
	testenv.Update(t, c, mine, func(cm *corev1.ConfigMap) {
		cm.Data["browser.json"] = `{"httpServers": [], "authorizer": {"allow": {}}}`
	})
	check(mine.Data)
}

// Components of other releases are Degraded, unless allowed.
func TestAMixOfReleasesIsDegradedUnlessAllowed(t *testing.T) {
	c := start(t)
	ns := namespace(t, c)
	installation(t, c, ns, 1)
	other := spec(1)
	other.Release = "20250101T000000Z-0000000"
	br := &bbv1.BuildbarnBrowser{ObjectMeta: meta(ns, "browser"), Spec: bbv1.BuildbarnBrowserSpec{ComponentSpec: other}}
	create(t, c, br)
	waitComponent(t, c, br, condition(bbv1.ConditionDegraded, metav1.ConditionTrue, "VersionSkew"), func(o controllerObject) error {
		return contains(conditionMessage(o, bbv1.ConditionDegraded), "BuildbarnStorage/storage runs "+release)
	})
	waitComponent(t, c, &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage")}, condition(bbv1.ConditionDegraded, metav1.ConditionTrue, "VersionSkew"))
	// Told once, as an event an Alert can take, however often it is
	// reconciled meanwhile.
	testenv.Eventually(t, 30*time.Second, func() error {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Kind == "BuildbarnBrowser" && e.Reason == "VersionSkew" {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d VersionSkew events of the browser, want 1", n)
		}
		return nil
	})
	testenv.Update(t, c, br, func(b *bbv1.BuildbarnBrowser) { b.Spec.AllowVersionSkew = true })
	waitComponent(t, c, br, condition(bbv1.ConditionDegraded, metav1.ConditionFalse, ""))
}

// An Ingress follows the browser's host, and goes when it is cleared.
func TestTheBrowsersIngressFollowsItsHost(t *testing.T) {
	c := start(t)
	ns := namespace(t, c)
	installation(t, c, ns, 1)
	br := &bbv1.BuildbarnBrowser{ObjectMeta: meta(ns, "browser"), Spec: bbv1.BuildbarnBrowserSpec{ComponentSpec: spec(1),
		BrowserExtras: bbv1.BrowserExtras{IngressHost: "bb.home.test"}}}
	create(t, c, br)
	ing := waitFor(t, c, &networkingIngress{ObjectMeta: meta(ns, "browser")}, func(i *networkingIngress) error {
		if i.Spec.Rules[0].Host != "bb.home.test" {
			return fmt.Errorf("the Ingress serves %s", i.Spec.Rules[0].Host)
		}
		return nil
	})
	// Workers and the scheduler link to the browser at its host.
	waitFor(t, c, &corev1.ConfigMap{ObjectMeta: meta(ns, "scheduler-config")}, func(cm *corev1.ConfigMap) error {
		return contains(cm.Data["scheduler.json"], `"browserUrl": "http://bb.home.test"`)
	})
	testenv.Update(t, c, br, func(b *bbv1.BuildbarnBrowser) { b.Spec.IngressHost = "" })
	waitGone(t, c, ing)
}

// Two storages in one namespace leave clients unable to choose: they are
// refused with both names.
func TestTwoStoragesInOneNamespaceAreRefused(t *testing.T) {
	c := start(t)
	ns := namespace(t, c)
	installation(t, c, ns, 1)
	create(t, c, &bbv1.BuildbarnStorage{ObjectMeta: meta(ns, "storage-b"), Spec: bbv1.BuildbarnStorageSpec{ComponentSpec: spec(1)}})
	waitComponent(t, c, &bbv1.BuildbarnScheduler{ObjectMeta: meta(ns, "scheduler")},
		condition(bbv1.ConditionReady, metav1.ConditionFalse, "InstallationAmbiguous"), func(o controllerObject) error {
			return contains(conditionMessage(o, bbv1.ConditionReady), "storage, storage-b")
		})
}
