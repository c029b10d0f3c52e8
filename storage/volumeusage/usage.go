// Package volumeusage keeps each claim's used bytes as its node's kubelet
// measured them: the kubelet asks strata's CSI node service
// (NodeGetVolumeStats) for every mounted volume and reports the answers
// in its stats summary, which this package reads from every node in
// turn.
//
// A node is not trusted with other nodes' claims: a usage is kept only
// for a claim that a pod the API server placed on that node mounts.
package volumeusage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Usage is a claim's filesystem as its node last measured it.
type Usage struct {
	Used, Capacity int64
	At             time.Time
}

// Claim names a claim.
type Claim = types.NamespacedName

// MaxSummary bounds a kubelet's answer: a summary is a few KiB a pod, and
// a node runs at most a few hundred.
const MaxSummary = 16 << 20

// Reader keeps every claim's usage, read from every node's kubelet each
// Interval.
type Reader struct {
	// Cache holds the nodes and pods.
	Cache client.Reader
	// Summary is a node's kubelet's stats summary (/stats/summary).
	Summary func(ctx context.Context, node *corev1.Node) (io.ReadCloser, error)
	// Interval between rounds; the kubelet measures once a minute by
	// default.
	Interval time.Duration
	// Changed is told after a round changed what is kept.
	Changed func()
	Log     logr.Logger

	mu    sync.RWMutex
	usage map[Claim]Usage
}

// Of is a claim's last usage, if its node reported one.
func (r *Reader) Of(c Claim) (Usage, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	u, ok := r.usage[c]
	return u, ok
}

// Start reads every node each Interval until ctx ends.
func (r *Reader) Start(ctx context.Context) error {
	for {
		r.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.Interval):
		}
	}
}

// Round reads every node once. A node that does not answer keeps what it
// said before, so that a page does not flicker with one slow kubelet; a
// claim no pod mounts any more is dropped.
func (r *Reader) Round(ctx context.Context) {
	var nodes corev1.NodeList
	var pods corev1.PodList
	if err := errors.Join(r.Cache.List(ctx, &nodes), r.Cache.List(ctx, &pods)); err != nil {
		r.Log.Error(err, "reading nodes and pods for the volumes' usage")
		return
	}
	mounted := mountedOn(pods.Items)
	next := map[Claim]Usage{}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		got, err := r.read(ctx, node, mounted[node.Name])
		if err != nil {
			r.Log.V(1).Info("the volumes' usage on this node is not read", "node", node.Name, "error", err.Error())
			got = r.keptFor(mounted[node.Name])
		}
		for c, u := range got {
			next[c] = u
		}
	}
	r.mu.Lock()
	changed := !equal(r.usage, next)
	r.usage = next
	r.mu.Unlock()
	if changed && r.Changed != nil {
		r.Changed()
	}
}

// mountedOn is, per node, the claims the pods placed there mount, by
// the pods' names.
func mountedOn(pods []corev1.Pod) map[string]map[podClaim]bool {
	out := map[string]map[podClaim]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			if out[p.Spec.NodeName] == nil {
				out[p.Spec.NodeName] = map[podClaim]bool{}
			}
			out[p.Spec.NodeName][podClaim{Pod: Claim{Namespace: p.Namespace, Name: p.Name}, Claim: v.PersistentVolumeClaim.ClaimName}] = true
		}
	}
	return out
}

// podClaim is a pod and the name of a claim it mounts (in its namespace).
type podClaim struct {
	Pod   Claim
	Claim string
}

// summary is the part of the kubelet's stats summary read here.
type summary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Volumes []struct {
			Time          time.Time `json:"time"`
			UsedBytes     *int64    `json:"usedBytes"`
			CapacityBytes *int64    `json:"capacityBytes"`
			PVCRef        *struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"pvcRef"`
		} `json:"volume"`
	} `json:"pods"`
}

// read asks node's kubelet, and keeps what it says only of claims that
// pods placed on node mount.
func (r *Reader) read(ctx context.Context, node *corev1.Node, mounted map[podClaim]bool) (map[Claim]Usage, error) {
	body, err := r.Summary(ctx, node)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var s summary
	limited := &io.LimitedReader{R: body, N: MaxSummary + 1}
	if err := json.NewDecoder(limited).Decode(&s); err != nil {
		if limited.N <= 0 {
			return nil, fmt.Errorf("the kubelet's stats summary is over %d MiB", MaxSummary>>20)
		}
		return nil, fmt.Errorf("reading the kubelet's stats summary: %w", err)
	}
	out := map[Claim]Usage{}
	for _, p := range s.Pods {
		pod := Claim{Namespace: p.PodRef.Namespace, Name: p.PodRef.Name}
		for _, v := range p.Volumes {
			if v.PVCRef == nil || v.UsedBytes == nil || v.PVCRef.Namespace != pod.Namespace || !mounted[podClaim{Pod: pod, Claim: v.PVCRef.Name}] {
				continue // not a claim, or not one a pod here mounts
			}
			u := Usage{Used: *v.UsedBytes, At: v.Time}
			if v.CapacityBytes != nil {
				u.Capacity = *v.CapacityBytes
			}
			out[Claim{Namespace: pod.Namespace, Name: v.PVCRef.Name}] = u
		}
	}
	return out, nil
}

// keptFor is what was kept of the claims mounted on a node that did not
// answer this round.
func (r *Reader) keptFor(mounted map[podClaim]bool) map[Claim]Usage {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[Claim]Usage{}
	for pc := range mounted {
		c := Claim{Namespace: pc.Pod.Namespace, Name: pc.Claim}
		if u, ok := r.usage[c]; ok {
			out[c] = u
		}
	}
	return out
}

func equal(a, b map[Claim]Usage) bool {
	if len(a) != len(b) {
		return false
	}
	for c, u := range a {
		if v, ok := b[c]; !ok || v.Used != u.Used || v.Capacity != u.Capacity || !v.At.Equal(u.At) {
			return false
		}
	}
	return true
}
