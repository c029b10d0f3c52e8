package replication

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// DestinationReconciler sets up the receiving side of each
// strata.dev/btrfs ReplicationDestination and reports its newest replica.
type DestinationReconciler struct {
	client.Client
	Agents mover.Agents
	// Refresh is how often the newest replica is read again from the
	// agent, which the sources' syncs advance.
	Refresh time.Duration
}

// SetupWithManager watches ReplicationDestinations, and the sources
// that send to them: a source's finished sync refreshes its
// destination's newest replica at once, not at the next Refresh.
func (r *DestinationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	destinationOfSource := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		rs := o.(*volsyncv1alpha1.ReplicationSource)
		if rs.Spec.External == nil || rs.Spec.External.Parameters[rules.ParamDestination] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: rs.Namespace, Name: rs.Spec.External.Parameters[rules.ParamDestination]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("replicationdestination").
		For(&volsyncv1alpha1.ReplicationDestination{}, SpecChanged).
		Owns(&corev1.Secret{}).
		Watches(&volsyncv1alpha1.ReplicationSource{}, destinationOfSource).
		Complete(r)
}

// Reconcile sets up the pair on the destination claim's agent.
func (r *DestinationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rd := &volsyncv1alpha1.ReplicationDestination{}
	if err := r.Get(ctx, req.NamespacedName, rd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rd.Spec.External == nil || !volsyncv1alpha1.IsStrata(rd.Spec.External.Provider) {
		return ctrl.Result{}, nil
	}
	before := rd.DeepCopy()
	if rd.Status == nil {
		rd.Status = &volsyncv1alpha1.ReplicationDestinationStatus{}
	}
	err := r.setUp(ctx, rd)
	if err != nil {
		status.Set(rd, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonError, err.Error())
	} else {
		status.Set(rd, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionTrue, volsyncv1alpha1.SynchronizingReasonSync,
			"ready to receive replicas from the source's agent")
	}
	if perr := status.Patch(ctx, r.Client, before, rd); perr != nil {
		return ctrl.Result{}, perr
	}
	return ctrl.Result{RequeueAfter: r.Refresh}, err
}

// setUp gives the pair its token and sets it up on the claim's agent.
func (r *DestinationReconciler) setUp(ctx context.Context, rd *volsyncv1alpha1.ReplicationDestination) error {
	claim := rd.Spec.External.Parameters[rules.ParamDestinationPVC]
	if claim == "" {
		return fmt.Errorf("spec.external.parameters.%s is empty: name the claim the replicas are for", rules.ParamDestinationPVC)
	}
	agent, volume, err := ClaimVolume(ctx, r.Client, r.Agents, rd.Spec.External.Provider, rd.Namespace, claim)
	if err != nil {
		return err
	}
	token, err := r.token(ctx, rd)
	if err != nil {
		return err
	}
	pair, err := agent.SetPair(ctx, pairName(rd.Namespace, rd.Name), wire.PairRequest{Volume: volume, Token: token})
	if err != nil {
		return fmt.Errorf("setting up pair %s on agent %s: %w", pairName(rd.Namespace, rd.Name), agent.Address(), err)
	}
	rd.Status.External = map[string]string{
		externalAgent: agent.Address(), externalTenant: pair.Tenant, externalPair: pair.Name,
		externalSecret: tokenSecretName(rd.Name), externalLatest: strconv.FormatUint(pair.Latest, 10),
	}
	if pair.Latest > 0 {
		rd.Status.LatestImage = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: claim}
		rd.Status.LastSyncTime = &metav1.Time{Time: *pair.LatestAt}
	}
	return nil
}

// token returns the pair's token from its Secret, making both the first
// time. The Secret is owned by the destination and goes with it.
func (r *DestinationReconciler) token(ctx context.Context, rd *volsyncv1alpha1.ReplicationDestination) (string, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: rd.Namespace, Name: tokenSecretName(rd.Name)}
	err := r.Get(ctx, key, secret)
	if err == nil {
		if t := string(secret.Data[tokenKey]); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("secret %s/%s has no %q key: delete it and strata makes a new one", key.Namespace, key.Name, tokenKey)
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		return "", err
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{tokenKey: []byte(hex.EncodeToString(random))}}
	if err := controllerutil.SetControllerReference(rd, secret, r.Scheme()); err != nil {
		return "", err
	}
	if err := r.Create(ctx, secret); err != nil {
		return "", err
	}
	return string(secret.Data[tokenKey]), nil
}
