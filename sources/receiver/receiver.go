// Package receiver serves Flux's notification.toolkit.fluxcd.io/v1
// Receiver: a webhook at /hook/<sha256(token+name+namespace)> that, when a
// forge reports a push, asks the listed sources to reconcile now.
package receiver

import (
	"context"
	"fmt"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/strata-gitops/strata/internal/status"
)

const webhookPathIndex = ".status.webhookPath"

// Reconciler publishes each Receiver's webhook path in its status.
type Reconciler struct {
	Client client.Client
}

// SetupWithManager registers the reconciler and the index the webhook
// handler looks Receivers up by.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &notificationv1.Receiver{}, webhookPathIndex, func(o client.Object) []string {
		return []string{o.(*notificationv1.Receiver).Status.WebhookPath}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&notificationv1.Receiver{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile computes the webhook path from the token Secret.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &notificationv1.Receiver{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopy()
	token, err := Token(ctx, r.Client, obj)
	if err != nil {
		status.MarkFailed(obj, meta.FailedReason, err.Error(), false)
	} else {
		obj.Status.WebhookPath = obj.GetWebhookPath(token)
		status.MarkReady(obj, meta.SucceededReason, "Receiver initialized for path: "+obj.Status.WebhookPath)
	}
	obj.Status.ObservedGeneration = obj.Generation
	if perr := status.Patch(ctx, r.Client, before, obj); perr != nil {
		return ctrl.Result{}, perr
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: obj.GetInterval()}, nil
	}
	return ctrl.Result{}, nil
}

// Token reads the Receiver's token from the `token` key of its Secret.
func Token(ctx context.Context, c client.Reader, obj *notificationv1.Receiver) (string, error) {
	if obj.Spec.SecretRef == nil {
		return "", fmt.Errorf("receiver %s/%s has no spec.secretRef: name a Secret with a 'token' key", obj.Namespace, obj.Name)
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Spec.SecretRef.Name}
	if err := c.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("secret '%s' named in spec.secretRef does not exist: create it with a 'token' key", key)
		}
		return "", err
	}
	token, ok := secret.Data["token"]
	if !ok || len(token) == 0 {
		return "", fmt.Errorf("secret '%s' has no 'token' key", key)
	}
	return string(token), nil
}
