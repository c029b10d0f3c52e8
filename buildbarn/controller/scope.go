package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/buildbarn/objects"
)

type configMapObject = corev1.ConfigMap

// scope is one reconcile of one component: what the managers share.
type scope struct {
	obj      Object
	kindName string
	spec     *bbv1.ComponentSpec
	owner    objects.Owner
	image    objects.Image
	// install is the namespace's other components.
	install installation
	// configMap is mounted into the pods; userConfig says it is the
	// user's (spec.configMapName) rather than generated.
	configMap  string
	files      config.Files
	hash       string
	userConfig bool
	// workload is what status is read from, once its manager ran.
	workload workload
	// degraded explains a problem that leaves the component running, as
	// a refused claim shrink does.
	degraded []string
	requeue  time.Duration
}

// replicas is the desired number of pods.
func (s *scope) replicas() int32 {
	if s.spec.Replicas == nil {
		return 1
	}
	return *s.spec.Replicas
}

// installation is the components of one namespace: one Buildbarn.
type installation struct {
	config.Installation
	// versions are each component's release, by "kind/name".
	versions map[string]string
}

// readInstallation lists the namespace's storages, schedulers and
// browsers. Two of a kind that clients need one of is an error: the
// frontends could not know which to use.
func readInstallation(ctx context.Context, c client.Reader, ns string) (installation, error) {
	in := installation{Installation: config.Installation{Namespace: ns}, versions: map[string]string{}}
	for _, k := range kinds {
		list := k.newList()
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return in, fmt.Errorf("listing %ss in namespace %s: %w", k.kindName, ns, err)
		}
		items := k.items(list)
		for _, o := range items {
			if o.GetStatus().Version != "" {
				in.versions[k.kindName+"/"+o.GetName()] = o.GetStatus().Version
			}
		}
		if k.single && len(items) > 1 {
			return in, refuse("InstallationAmbiguous", "namespace %s has %d %ss (%s): one Buildbarn per namespace takes one; move the others to their own namespaces",
				ns, len(items), k.kindName, names(items))
		}
		if len(items) == 1 {
			k.describe(items[0], &in.Installation)
		}
	}
	return in, nil
}

func names(items []Object) string {
	var n []string
	for _, o := range items {
		n = append(n, o.GetName())
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// skewExcept names the other components whose release is not
// version.
func (in installation) skewExcept(kindName, name, version string) []string {
	var other []string
	for who, v := range in.versions {
		if v != version && who != kindName+"/"+name {
			other = append(other, fmt.Sprintf("%s runs %s", who, v))
		}
	}
	sort.Strings(other)
	return other
}
