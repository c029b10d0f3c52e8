package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/apply"
)

// requestCost is what one kind of request costs the API server and etcd,
// in CPU seconds per request, and how many of it a Kustomization's first
// apply sends.
type requestCost struct {
	what             string
	role             costRole
	perKustomization int
	cpu              float64
}

// costRole names the costs the summary line reads, so that adding a kind
// of request cannot shift which one it takes.
type costRole int

const (
	anyRequest costRole = iota
	floorRequest
	finalizerPatch
	plainCreate  // a Kustomization created without the chart's finalizer policy
	policyCreate // and with it
)

// costRounds is how many turns the request kinds take.
const costRounds = 5

// measureCosts sends, on a fresh control plane, each kind of request
// strata's first pass makes, as many as the pass makes, floorWorkers at a
// time, and measures each kind's CPU on the API server and etcd. These are
// the requests Flux's semantics ask for: validating every object before
// any is applied, the finalizer before the first apply, the status and an
// event after it. Nothing watches, so the costs are a lower bound.
func measureCosts(cfg config) ([]requestCost, error) {
	b, err := newBench(cfg)
	if err != nil {
		return nil, err
	}
	defer b.close()
	b.repoURL = "http://127.0.0.1:1/never-fetched.git" // nothing reconciles it
	if err := b.createObjects(); err != nil {
		return nil, err
	}
	c, err := unlimitedClient(b)
	if err != nil {
		return nil, err
	}
	objs, err := floorObjects(cfg)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	// Read once, as the engine reads them from its cache.
	var list kustomizev1.KustomizationList
	if err := c.List(ctx, &list, client.InNamespace("flux-system")); err != nil {
		return nil, err
	}
	byName := map[string]*kustomizev1.Kustomization{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	ks := func(i int) *kustomizev1.Kustomization { return byName[name(i, cfg.infra)].DeepCopy() }
	createIn, err := b.namespacesForPolicy()
	if err != nil {
		return nil, err
	}
	perObject := func(opts ...client.PatchOption) func(i int) error {
		return func(i int) error { return applyCreating(ctx, c, objs[i].DeepCopy(), opts...) }
	}
	kinds := []struct {
		what string
		role costRole
		n    int // requests measured
		per  int // requests per Kustomization in the controller's first pass
		send func(i int) error
	}{
		// Each round dry-runs its objects before it creates them.
		{"server-side apply dry-run of an object to create", anyRequest, len(objs), 4, perObject(client.DryRunAll)},
		{"server-side apply creating an object (the floor's request)", floorRequest, len(objs), 4, perObject()},
		{"Kustomization finalizer, merge patch", finalizerPatch, cfg.kustomizations, 1, func(i int) error { return addFinalizer(ctx, c, ks(i)) }},
		{"Kustomization status, merge patch", anyRequest, cfg.kustomizations, 1, func(i int) error {
			return writeStatus(ctx, c, ks(i), created(objs[4*i:4*i+4]))
		}},
		{"Event", anyRequest, cfg.kustomizations, 1, func(i int) error {
			return recordEvent(ctx, c, name(i, cfg.infra), created(objs[4*i:4*i+4]))
		}},
		// Sent by whoever creates the Kustomizations, not by the controller.
		{"Kustomization create", plainCreate, cfg.kustomizations, 0, func(i int) error {
			return createKustomization(ctx, c, b.kustomization(i), createIn[0])
		}},
		{"Kustomization create, Flux's finalizer added by the chart's policy", policyCreate, cfg.kustomizations, 0, func(i int) error {
			return createKustomization(ctx, c, b.kustomization(i), createIn[1])
		}},
	}
	// In rounds, each kind a share of its requests in turn, so that a
	// machine that slows down or speeds up during the run weighs on every
	// kind alike.
	cpu := make([]float64, len(kinds))
	for round := range costRounds {
		for i, k := range kinds {
			from, to := round*k.n/costRounds, (round+1)*k.n/costRounds
			before := serverCPU()
			if err := inParallel(to-from, func(j int) error { return k.send(from + j) }); err != nil {
				return nil, fmt.Errorf("%s: %w", k.what, err)
			}
			cpu[i] += serverCPU() - before
		}
	}
	var costs []requestCost
	for i, k := range kinds {
		costs = append(costs, requestCost{what: k.what, role: k.role, perKustomization: k.per, cpu: cpu[i] / float64(k.n)})
	}
	return costs, nil
}

// serverCPU is the CPU seconds the control plane has used so far.
func serverCPU() float64 { return childrenCPU("kube-apiserver") + childrenCPU("etcd") }

// addFinalizer is the engine's first write to a Kustomization.
func addFinalizer(ctx context.Context, c client.Client, ks *kustomizev1.Kustomization) error {
	before := ks.DeepCopy()
	ks.Finalizers = append(ks.Finalizers, "finalizers.fluxcd.io")
	return c.Patch(ctx, ks, client.MergeFrom(before))
}

// writeStatus is the status of a first apply: Ready at the revision, with
// the inventory of what it created.
func writeStatus(ctx context.Context, c client.Client, ks *kustomizev1.Kustomization, cs *ssa.ChangeSet) error {
	before := ks.DeepCopy()
	revision := "main@sha1:" + strings.Repeat("0", 40)
	ks.Status.ObservedGeneration = ks.Generation
	ks.Status.LastAttemptedRevision, ks.Status.LastAppliedRevision = revision, revision
	ks.Status.Inventory = apply.Inventory(cs)
	status.MarkReady(ks, meta.ReconciliationSucceededReason, "Applied revision: "+revision)
	return status.Patch(ctx, c, before, ks)
}

// namespacesForPolicy makes two namespaces to create Kustomizations in, the
// chart's finalizer policy bound only in the second.
func (b *bench) namespacesForPolicy() ([2]string, error) {
	const label = "bench.strata.dev/finalizer-policy"
	names := [2]string{"policy-off", "policy-on"}
	ctx := context.Background()
	for i, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if i == 1 {
			ns.Labels = map[string]string{label: "on"}
		}
		if err := b.c.Create(ctx, ns); err != nil {
			return names, err
		}
	}
	policy, err := b.finalizerPolicy()
	if err != nil {
		return names, err
	}
	if err := boundTo(policy, label); err != nil {
		return names, err
	}
	return names, b.installFinalizerPolicy(policy, names[1])
}

// createKustomization creates ks in namespace ns.
func createKustomization(ctx context.Context, c client.Client, ks *kustomizev1.Kustomization, ns string) error {
	ks.Namespace = ns
	return c.Create(ctx, ks)
}

// recordEvent is the event of a first apply, naming each change.
func recordEvent(ctx context.Context, c client.Client, n string, cs *ssa.ChangeSet) error {
	note := "Applied revision: main@sha1:" + strings.Repeat("0", 40) + "\n"
	for _, e := range cs.Entries {
		note += e.String() + "\n"
	}
	now := metav1.NowMicro()
	return c.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", n, now.UnixNano()), Namespace: "flux-system"},
		EventTime:  now, ReportingController: "strata", ReportingInstance: "strata",
		Action: "Apply", Reason: meta.ReconciliationSucceededReason, Type: corev1.EventTypeNormal, Note: note,
		Regarding: corev1.ObjectReference{Kind: kustomizev1.KustomizationKind, APIVersion: kustomizev1.GroupVersion.String(),
			Namespace: "flux-system", Name: n},
	})
}

// created is the change set of a first apply that created objs.
func created(objs []*unstructured.Unstructured) *ssa.ChangeSet {
	cs := ssa.NewChangeSet()
	for _, u := range objs {
		cs.Add(ssa.ChangeSetEntry{ObjMetadata: object.UnstructuredToObjMetadata(u), GroupVersion: u.GetAPIVersion(),
			Subject: ssautils.FmtUnstructured(u), Action: ssa.CreatedAction})
	}
	return cs
}

// printCosts prints each request kind's cost and what the requests of one
// Kustomization cost the control plane against the floor's.
func printCosts(costs []requestCost) {
	fmt.Printf("costs: CPU of kube-apiserver and etcd per request, %d at a time on a fresh control plane, with nothing watching:\n", floorWorkers)
	var without float64
	byRole := map[costRole]requestCost{}
	for _, c := range costs {
		fmt.Printf("  %s: %.2f ms, %d per Kustomization\n", c.what, 1000*c.cpu, c.perKustomization)
		without += float64(c.perKustomization) * c.cpu
		byRole[c.role] = c
	}
	floor := float64(byRole[floorRequest].perKustomization) * byRole[floorRequest].cpu
	// With the chart's policy the controller sends no finalizer patch, and
	// each create costs what the policy adds to it.
	added := byRole[policyCreate].cpu - byRole[plainCreate].cpu
	with := without - byRole[finalizerPatch].cpu + added
	fmt.Printf("costs: per Kustomization, the floor's requests %.1f ms, strata's %.1f ms with the chart's finalizer policy (no finalizer patch, %.2f ms more for the create), %.1f ms without it: %.2fx and %.2fx the floor's\n",
		1000*floor, 1000*with, 1000*added, 1000*without, with/floor, without/floor)
}
