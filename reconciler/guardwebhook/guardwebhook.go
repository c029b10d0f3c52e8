// Package guardwebhook is the data-loss guard for Flux's own prunes, in
// storage-only mode: a validating admission webhook that refuses a delete
// by Flux's kustomize-controller of an object that holds data (a
// PersistentVolume, a claim, a snapshot, strata's storage objects, a
// Namespace holding claims), unless the object or the Kustomization that
// applied it carries strata.dev/allow-data-loss: "true". Flux deletes as
// itself, as the service account a Kustomization names (or its
// --default-service-account), and through the garbage collector when an
// owner it pruned takes owned objects with it: each of these is judged
// for the objects a Kustomization applied. Its rules and messages are the
// engine's (package guard), so Flux's Kustomization status says what
// strata's would.
package guardwebhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/strata-gitops/strata/reconciler/guard"
)

// Path is where the webhook is served.
const Path = "/guard-flux-prunes"

// DefaultUsers are the users whose deletes the guard checks: Flux's
// kustomize-controller, as Flux installs it.
var DefaultUsers = []string{"system:serviceaccount:flux-system:kustomize-controller"}

// DefaultGarbageCollectors are the users the garbage collector deletes
// as: kube-controller-manager with a service account per controller, or
// with its own credentials.
var DefaultGarbageCollectors = []string{"system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager"}

// serviceAccountPrefix begins every service account's username.
const serviceAccountPrefix = "system:serviceaccount:"

// Flux's kustomize-controller labels what it applies with the
// Kustomization that applied it.
const (
	fluxNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	fluxNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
)

// Handler decides admission requests.
type Handler struct {
	// Reader reads what guard.Reason looks at (a Namespace's claims, the
	// owners of claims) and the Kustomization that applied an object.
	Reader client.Reader
	// Users are Flux's kustomize-controller's users, whose deletes are
	// checked whatever they delete; empty: DefaultUsers.
	Users []string
	// GarbageCollectors are the garbage collector's users; empty:
	// DefaultGarbageCollectors. Their deletes of what a Kustomization
	// applied are checked.
	GarbageCollectors []string
	// DefaultServiceAccount is Flux's kustomize-controller's
	// --default-service-account: what a Kustomization naming no
	// spec.serviceAccountName applies and prunes as.
	DefaultServiceAccount string
}

// Handle allows anything but a checked user's delete that would lose
// data without the opt-in.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	user := req.UserInfo.Username
	flux := slices.Contains(or(h.Users, DefaultUsers), user)
	if !flux && !slices.Contains(or(h.GarbageCollectors, DefaultGarbageCollectors), user) && !strings.HasPrefix(user, serviceAccountPrefix) {
		return admission.Allowed("")
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.OldObject.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("the object being deleted could not be read: %w", err))
	}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind})
	owner, err := h.kustomization(ctx, obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !flux && !h.actsForKustomization(user, owner) {
		return admission.Allowed("")
	}
	var applier client.Object
	if owner != nil {
		applier = owner
	}
	err = guard.Check(ctx, h.Reader, obj, applier)
	var blocked *guard.Blocked
	switch {
	case errors.As(err, &blocked):
		return admission.Denied(blocked.Error())
	case err != nil:
		// Fail closed: a delete that cannot be judged is refused, and
		// Flux tries again at its next reconcile.
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("strata's data-loss guard could not judge this deletion: %w", err))
	}
	return admission.Allowed("")
}

func or(list, otherwise []string) []string {
	if len(list) == 0 {
		return otherwise
	}
	return list
}

// actsForKustomization says whether user deletes on behalf of ks, the
// Kustomization that applied the object: the garbage collector (an owner
// Flux pruned takes the object with it), or the service account Flux
// impersonates for ks. Anyone else's delete (a person's, another
// controller's) is not Flux's.
func (h *Handler) actsForKustomization(user string, ks *kustomizev1.Kustomization) bool {
	if ks == nil {
		return false
	}
	if slices.Contains(or(h.GarbageCollectors, DefaultGarbageCollectors), user) {
		return true
	}
	sa := ks.Spec.ServiceAccountName
	if sa == "" {
		sa = h.DefaultServiceAccount
	}
	return sa != "" && user == serviceAccountPrefix+ks.Namespace+":"+sa
}

// kustomization is the Flux Kustomization whose labels obj carries, or nil.
func (h *Handler) kustomization(ctx context.Context, obj client.Object) (*kustomizev1.Kustomization, error) {
	name, ns := obj.GetLabels()[fluxNameLabel], obj.GetLabels()[fluxNamespaceLabel]
	if name == "" || ns == "" {
		return nil, nil
	}
	ks := &kustomizev1.Kustomization{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ks); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Kustomization %s/%s, which applied the object: %w", ns, name, err)
	}
	return ks, nil
}
