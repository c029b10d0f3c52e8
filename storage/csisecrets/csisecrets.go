// Package csisecrets gives the CSI controller read access to exactly the
// Secrets strata's StorageClasses name, and no other: a Role per
// namespace naming those Secrets, bound to the CSI controller's service
// account, kept in step with the classes. The CSI controller's own role
// then reads no Secret at all, so its token, if stolen, opens the token
// and CA Secrets of strata's classes, not the cluster's.
package csisecrets

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// Label marks the Roles and RoleBindings this package keeps.
const Label = "strata.dev/csi-secrets"

// Reconciler keeps the Roles.
type Reconciler struct {
	client.Client
	// Account is the CSI controller's service account.
	Account client.ObjectKey
	// Name names the Role and RoleBinding in each namespace.
	Name   string
	Events events.EventRecorder
}

// SetupWithManager reconciles on any change of a StorageClass, or of the
// Roles and RoleBindings it keeps: one reconcile takes in every class.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "all"}}}
	})
	ours := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[Label] == "true" }))
	return ctrl.NewControllerManagedBy(mgr).Named("csisecrets").
		Watches(&storagev1.StorageClass{}, all).
		Watches(&rbacv1.Role{}, all, ours).
		Watches(&rbacv1.RoleBinding{}, all, ours).
		Complete(r)
}

// Reconcile makes each namespace's Role name the Secrets the classes
// name there, and removes the Roles of namespaces no class names.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	classes := &storagev1.StorageClassList{}
	if err := r.List(ctx, classes); err != nil {
		return ctrl.Result{}, err
	}
	wanted := map[string][]string{} // namespace → Secret names
	for i := range classes.Items {
		sc := &classes.Items[i]
		if sc.Provisioner != storagev1alpha1.CSIDriver {
			continue
		}
		for _, ref := range SecretsOf(sc) {
			if ref.templated {
				r.warn(sc, ref)
				continue
			}
			if !slices.Contains(wanted[ref.Namespace], ref.Name) {
				wanted[ref.Namespace] = append(wanted[ref.Namespace], ref.Name)
			}
		}
	}
	for ns, names := range wanted {
		sort.Strings(names)
		if err := r.ensure(ctx, ns, names); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.removeUnwanted(ctx, wanted)
}

// SecretRef is a Secret a class names.
type SecretRef struct {
	client.ObjectKey
	// Parameter is the class parameter that names it.
	Parameter string
	templated bool
}

// SecretsOf lists the Secrets a strata class names: its CA
// (agentCASecret, namespace/name) and each CSI secret parameter pair
// (csi.storage.k8s.io/<operation>-secret-name and -namespace).
func SecretsOf(sc *storagev1.StorageClass) []SecretRef {
	var refs []SecretRef
	if v := sc.Parameters["agentCASecret"]; v != "" {
		ns, name, _ := strings.Cut(v, "/")
		refs = append(refs, SecretRef{ObjectKey: client.ObjectKey{Namespace: ns, Name: name}, Parameter: "agentCASecret"})
	}
	keys := make([]string, 0, len(sc.Parameters))
	for k := range sc.Parameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		prefix, ok := strings.CutSuffix(k, "-secret-name")
		if !ok || !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			continue
		}
		ref := SecretRef{ObjectKey: client.ObjectKey{Namespace: sc.Parameters[prefix+"-secret-namespace"], Name: sc.Parameters[k]}, Parameter: k}
		ref.templated = strings.Contains(ref.Name, "${") || strings.Contains(ref.Namespace, "${")
		refs = append(refs, ref)
	}
	return refs
}

func (r *Reconciler) warn(sc *storagev1.StorageClass, ref SecretRef) {
	if r.Events != nil {
		r.Events.Eventf(sc, nil, corev1.EventTypeWarning, "TemplatedSecret", "GrantSecretAccess",
			"%s names its Secret by a template (%s/%s): the CSI controller reads only Secrets a class names outright; name it, or set the chart value csi.secretAccess=cluster",
			ref.Parameter, ref.Namespace, ref.Name)
	}
}

// ensure makes the namespace's Role name exactly names, and binds it.
func (r *Reconciler) ensure(ctx context.Context, ns string, names []string) error {
	meta := metav1.ObjectMeta{Namespace: ns, Name: r.Name, Labels: map[string]string{Label: "true"}}
	role := &rbacv1.Role{ObjectMeta: meta}
	if _, err := ctrl.CreateOrUpdate(ctx, r.Client, role, func() error {
		role.Labels = meta.Labels
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: names, Verbs: []string{"get"}}}
		return nil
	}); err != nil {
		return fmt.Errorf("the CSI controller's Secret access in namespace %s: %w", ns, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta}
	if _, err := ctrl.CreateOrUpdate(ctx, r.Client, binding, func() error {
		binding.Labels = meta.Labels
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: r.Account.Namespace, Name: r.Account.Name}}
		return nil
	}); err != nil {
		return fmt.Errorf("the CSI controller's Secret access in namespace %s: %w", ns, err)
	}
	return nil
}

// removeUnwanted removes the Roles and RoleBindings of namespaces no
// class names a Secret in any more.
func (r *Reconciler) removeUnwanted(ctx context.Context, wanted map[string][]string) error {
	for _, list := range []client.ObjectList{&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
		if err := r.List(ctx, list, client.MatchingLabels{Label: "true"}); err != nil {
			return err
		}
		var objs []client.Object
		switch l := list.(type) {
		case *rbacv1.RoleList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *rbacv1.RoleBindingList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, o := range objs {
			if _, ok := wanted[o.GetNamespace()]; ok && o.GetName() == r.Name {
				continue
			}
			if err := r.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}
