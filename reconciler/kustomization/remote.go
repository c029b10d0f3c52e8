package kustomization

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/status"
)

// ClusterCondition says which cluster the objects of a Kustomization's
// inventory are on, when spec.kubeConfig names another one: its API
// server's URL and the Secret that reaches it.
const ClusterCondition = "Cluster"

// remoteTimeout bounds each request to a remote cluster, so that one that
// cannot be reached fails the reconcile in seconds, not minutes.
const remoteTimeout = 30 * time.Second

// target is the cluster a Kustomization applies to: this one, or the one
// its spec.kubeConfig Secret reaches.
type target struct {
	config *rest.Config
	// server is the remote API server's URL; empty for this cluster.
	server string
	// from names the Secret, for messages.
	from string
	// key is the kubeconfig's digest, under which its clients are kept.
	key string
}

// targetOf reads spec.kubeConfig: a Secret of the Kustomization's
// namespace holding a kubeconfig under secretRef.key, else "value", else
// "value.yaml", as Flux reads it.
func (r *Reconciler) targetOf(ctx context.Context, obj *kustomizev1.Kustomization) (*target, error) {
	kc := obj.Spec.KubeConfig
	if kc == nil {
		return &target{config: r.Config}, nil
	}
	if kc.SecretRef == nil {
		return nil, fmt.Errorf("spec.kubeConfig.configMapRef (workload identity with a cloud provider) is not served: " +
			"give a kubeconfig in a Secret named by spec.kubeConfig.secretRef")
	}
	key := client.ObjectKey{Namespace: obj.Namespace, Name: kc.SecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.Direct.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret '%s' named in spec.kubeConfig.secretRef does not exist: create it with the remote cluster's kubeconfig", key)
		}
		return nil, err
	}
	keys := []string{"value", "value.yaml"}
	if kc.SecretRef.Key != "" {
		keys = []string{kc.SecretRef.Key}
	}
	for _, k := range keys {
		data, ok := secret.Data[k]
		if !ok {
			continue
		}
		cfg, err := remoteConfig(data, r.InsecureKubeconfigTLS)
		if err != nil {
			return nil, fmt.Errorf("secret '%s' key %s (spec.kubeConfig) is refused: %w; nothing was applied or pruned", key, k, err)
		}
		cfg.Timeout = remoteTimeout
		sum := sha256.Sum256(data)
		return &target{config: cfg, server: cfg.Host, from: fmt.Sprintf("secret %s key %s", key, k), key: hex.EncodeToString(sum[:])}, nil
	}
	return nil, fmt.Errorf("secret '%s' named in spec.kubeConfig.secretRef has no key %v holding a kubeconfig", key, keys)
}

// reachable asks the remote cluster for its version: one that cannot be
// reached fails the reconcile before anything is applied or pruned.
func (t *target) reachable(dc discovery.DiscoveryInterface) error {
	if t.server == "" {
		return nil
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("the cluster at %s (spec.kubeConfig, %s) cannot be reached: %w; nothing was applied or pruned", t.server, t.from, err)
	}
	return nil
}

// movedFrom is the cluster the inventory was recorded on, when that is
// not t: its objects are left where they are, never pruned from t.
func (t *target) movedFrom(obj *kustomizev1.Kustomization) (string, bool) {
	recorded := ""
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, ClusterCondition); c != nil {
		recorded = c.Message
	}
	if obj.Status.Inventory == nil || len(obj.Status.Inventory.Entries) == 0 {
		return "", false
	}
	if recorded == t.server {
		return "", false
	}
	if recorded == "" {
		return "this cluster", true
	}
	return recorded, true
}

// record notes the cluster of the inventory in status.
func (t *target) record(obj *kustomizev1.Kustomization) {
	if t.server == "" {
		status.Remove(obj, ClusterCondition)
		return
	}
	status.Set(obj, ClusterCondition, metav1.ConditionTrue, "RemoteCluster", t.server)
}
