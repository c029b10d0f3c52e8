// Package controller reconciles the five Buildbarn kinds. Each kind has
// its own controller built from one kind description (kinds.go); a
// reconcile pins the image, reads the installation (the other components
// in the namespace), generates the configuration, and runs one manager
// per owned object (managers.go), each of which applies its object with
// server-side apply under strata's field manager. Status comes from the
// owned Deployment or StatefulSet (status.go).
package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/internal/status"
)

// Reconciler reconciles one Buildbarn kind.
type Reconciler struct {
	client.Client
	Events events.EventRecorder
	// ImageRepository is where images not named in a spec come from:
	// <repository>/bb-storage and so on.
	ImageRepository string
	kind            *kind
}

// Object is a Buildbarn component as the API server has it.
type Object interface {
	client.Object
	bbv1.Component
}

// SetupAll registers a controller for each of the five kinds.
func SetupAll(mgr ctrl.Manager, events events.EventRecorder, imageRepository string) error {
	for _, k := range kinds {
		r := &Reconciler{Client: mgr.GetClient(), Events: events, ImageRepository: imageRepository, kind: k}
		if err := r.setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// refusal is an error the user must fix in the spec or the cluster;
// retrying will not help, so it stalls the object until it changes.
// Its reason is the Ready condition's reason.
type refusal struct {
	reason string
	error
}

func refuse(reason, format string, args ...any) error {
	return refusal{reason, fmt.Errorf(format, args...)}
}

func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

// Reconcile converges one component's objects and reports its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if done, err := r.handleDeletion(ctx, obj); done {
		return ctrl.Result{}, err
	}
	before := obj.DeepCopyObject().(Object)
	s, err := r.converge(ctx, obj)
	result := ctrl.Result{}
	if s != nil && s.requeue > 0 {
		result.RequeueAfter = s.requeue
	}
	if serr := r.report(ctx, obj, s, err); serr != nil {
		return ctrl.Result{}, serr
	}
	if perr := status.Patch(ctx, r.Client, before, obj); perr != nil {
		return ctrl.Result{}, perr
	}
	if isRefusal(err) {
		return result, nil
	}
	return result, err
}

// converge builds the component's scope and runs its managers in order;
// the first failure stops the rest.
func (r *Reconciler) converge(ctx context.Context, obj Object) (*scope, error) {
	s, err := r.newScope(ctx, obj)
	if err != nil {
		return s, err
	}
	for _, m := range r.kind.managers(s) {
		if err := m.ensure(ctx, r, s); err != nil {
			return s, fmt.Errorf("%s: %w", m.name(), err)
		}
	}
	return s, nil
}

// newScope resolves what every manager needs: the pinned image, the
// installation, and the configuration with its hash.
func (r *Reconciler) newScope(ctx context.Context, obj Object) (*scope, error) {
	spec := obj.GetComponent()
	s := &scope{obj: obj, kindName: r.kind.kindName, spec: spec, owner: r.kind.owner(obj)}
	img, err := objects.ResolveImage("spec.image", spec.Image, spec.Release, r.ImageRepository, r.kind.image)
	if err != nil {
		return s, refusal{"ImageNotPinned", err}
	}
	s.image = img
	if s.install, err = readInstallation(ctx, r.Client, obj.GetNamespace()); err != nil {
		return s, err
	}
	if err := r.configure(ctx, s); err != nil {
		return s, err
	}
	return s, nil
}

// configure generates the configuration, or reads the user's ConfigMap
// that replaces it, and hashes what the pods will see.
func (r *Reconciler) configure(ctx context.Context, s *scope) error {
	if name := s.spec.ConfigMapName; name != "" {
		cm := &configMapObject{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: s.owner.Namespace, Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return refuse("ConfigMapNotFound", "ConfigMap %s named by spec.configMapName is not in namespace %s: create it or clear the field", name, s.owner.Namespace)
			}
			return err
		}
		s.configMap, s.files, s.userConfig = name, config.Files(cm.Data), true
		s.hash = objects.Hash(cm.Data)
		return nil
	}
	files, err := r.kind.files(s)
	if err != nil {
		return refusal{"InstallationIncomplete", err}
	}
	s.configMap, s.files, s.hash = s.owner.ConfigMapName(), files, objects.Hash(files)
	return nil
}
