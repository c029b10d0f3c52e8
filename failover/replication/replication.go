// Package replication drives strata's movers from VolSync's
// ReplicationSource and ReplicationDestination objects whose
// spec.external.provider is strata.dev/btrfs or strata.dev/lvm. The destination's side is
// set up first: its claim's agent gets the pair and a token, and the
// destination's status says where it is. The source's side then syncs
// on its trigger: its claim's agent streams the next replica straight to
// the destination's agent. Objects of other providers are left alone.
package replication

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/mover"
)

// Keys of the destination's status.external, which the source reads.
const (
	externalAgent  = "agentURL"
	externalTenant = "tenant"
	externalPair   = "pair"
	externalSecret = "tokenSecret"
	externalLatest = "replica"
)

// tokenKey is the key of the pair's token in its Secret.
const tokenKey = "token"

// BoundVolume reads a claim of the namespace and the volume it is bound
// to; a claim not bound yet is an error that says so.
func BoundVolume(ctx context.Context, c client.Reader, namespace, claim string) (*corev1.PersistentVolume, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claim}, pvc); err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", namespace, claim, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, fmt.Errorf("claim %s/%s is %s, not Bound: replication and failover wait for its volume", namespace, claim, pvc.Status.Phase)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return nil, fmt.Errorf("volume %s of claim %s/%s: %w", pvc.Spec.VolumeName, namespace, claim, err)
	}
	return pv, nil
}

// ClaimVolume resolves a claim of the namespace to the agent holding its
// volume and the volume's name there. provider, when set, must be the
// mover of the claim's volume (rules.CheckMover); empty takes either.
func ClaimVolume(ctx context.Context, c client.Reader, agents mover.Agents, provider, namespace, claim string) (mover.Agent, string, error) {
	pv, err := BoundVolume(ctx, c, namespace, claim)
	if err != nil {
		return nil, "", err
	}
	if provider == "" {
		provider = rules.MoverOf(pv)
	}
	if err := rules.CheckMover(provider, namespace+"/"+claim, pv); err != nil {
		return nil, "", err
	}
	agent, name, err := agents.AgentOf(ctx, pv.Spec.CSI.VolumeHandle)
	if err != nil {
		return nil, "", fmt.Errorf("volume %s of claim %s/%s: %w", pv.Name, namespace, claim, err)
	}
	return agent, name, nil
}

// pairName is the pair's name on both agents: unique per destination.
func pairName(namespace, destination string) string { return namespace + "." + destination }

// tokenSecretName is the Secret that holds the pair's token, beside the
// destination.
func tokenSecretName(destination string) string { return destination + "-strata-pair" }

// Destination is where a set-up ReplicationDestination receives, as its
// status.external publishes it for the source and the Failover
// controller: the agent, the tenant there, the pair, and the Secret with
// the pair's token.
type Destination struct {
	Agent, Tenant, Pair, TokenSecret string
}

// DestinationOf reads what the destination published; false until it is
// set up.
func DestinationOf(rd *volsyncv1alpha1.ReplicationDestination) (Destination, bool) {
	if rd.Status == nil || rd.Status.External[externalAgent] == "" || rd.Status.External[externalPair] == "" {
		return Destination{}, false
	}
	ext := rd.Status.External
	return Destination{Agent: ext[externalAgent], Tenant: ext[externalTenant], Pair: ext[externalPair], TokenSecret: ext[externalSecret]}, true
}

// Token reads the pair's token from its Secret in namespace ns.
func (d Destination) Token(ctx context.Context, c client.Reader, ns string) (string, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.TokenSecret}, secret); err != nil {
		return "", fmt.Errorf("the pair's token Secret %s/%s: %w", ns, d.TokenSecret, err)
	}
	token := string(secret.Data[tokenKey])
	if token == "" {
		return "", fmt.Errorf("secret %s/%s has no %q key: delete it and strata makes a new one", ns, d.TokenSecret, tokenKey)
	}
	return token, nil
}

// SpecChanged lets a reconciler's own object wake it for changes to its
// spec, labels or annotations, not for the status it writes itself: a
// step that fails and records why is retried with backoff rather than
// woken again by its own write. Every wait a reconciler has is polled.
var SpecChanged = builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
	predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))
