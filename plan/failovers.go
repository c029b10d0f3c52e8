package plan

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/rules"
)

// checkFailovers checks each Failover of the head revision against the
// objects the same revision declares beside it, before any is applied:
// a pair on one node, a claim, workload or replication object the
// revision lacks, a volume pinned to another node than its side's, a
// claim on a class strata cannot replicate, a backup smaller than the
// primary, or a pair that does not join the two claims. Each is a plan
// error naming the Failover.
func (c *comparison) checkFailovers() {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(failoverv1alpha1.GroupVersion.WithKind("FailoverList"))
	if err := c.head.objects.List(c.ctx, list); err != nil {
		c.plan.Errors = append(c.plan.Errors, fmt.Sprintf("listing the Failovers at head: %v", err))
		return
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].GetNamespace()+"/"+list.Items[i].GetName() < list.Items[j].GetNamespace()+"/"+list.Items[j].GetName()
	})
	for _, item := range list.Items {
		fo := &failoverv1alpha1.Failover{}
		problems := []string{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, fo); err != nil {
			problems = append(problems, err.Error())
		} else {
			problems = failoverProblems(c.ctx, c.head.objects, fo)
		}
		for _, p := range problems {
			c.plan.Errors = append(c.plan.Errors, fmt.Sprintf("Failover %s/%s: %s", item.GetNamespace(), item.GetName(), p))
		}
	}
}

func failoverProblems(ctx context.Context, r client.Reader, fo *failoverv1alpha1.Failover) []string {
	var problems []string
	add := func(err error) {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if fo.Spec.Primary.Node == fo.Spec.Backup.Node {
		add(fmt.Errorf("primary and backup are both on node %s: a pair on one node survives no node loss", fo.Spec.Primary.Node))
	}
	primary, primaryClass, err := sideVolume(ctx, r, fo.Namespace, fo.Spec.Primary, "primary")
	add(err)
	backup, backupClass, err := sideVolume(ctx, r, fo.Namespace, fo.Spec.Backup, "backup")
	add(err)
	if primary != nil && backup != nil {
		add(rules.FailoverSizes(fo, primary, backup))
	}
	add(workloadUsesASide(ctx, r, fo))
	rs, rd := &volsyncv1alpha1.ReplicationSource{}, &volsyncv1alpha1.ReplicationDestination{}
	errRS := inRevision(ctx, r, fo.Namespace, fo.Spec.Replication.Source, rs, "ReplicationSource")
	errRD := inRevision(ctx, r, fo.Namespace, fo.Spec.Replication.Destination, rd, "ReplicationDestination")
	add(errRS)
	add(errRD)
	if errRS == nil && errRD == nil {
		add(rules.FailoverReplication(fo, rs, rd))
	}
	if errRS == nil && rs.Spec.External != nil {
		add(moverOfClass(rs.Spec.External.Provider, fo.Spec.Primary.Claim, primaryClass, "primary"))
		add(moverOfClass(rs.Spec.External.Provider, fo.Spec.Backup.Claim, backupClass, "backup"))
	}
	return problems
}

// moverOfClass checks that the pair's provider replicates the volumes of
// a side's class: btrfs classes strata.dev/btrfs, LVM ones strata.dev/lvm.
func moverOfClass(provider, claim string, sc *storagev1.StorageClass, side string) error {
	if sc == nil || sc.Provisioner != storagev1alpha1.CSIDriver || !volsyncv1alpha1.IsStrata(provider) {
		return nil
	}
	kind, mover := "an LVM class", volsyncv1alpha1.ProviderLVM
	if rules.IsBtrfsClass(sc.Parameters) {
		kind, mover = "a btrfs class", volsyncv1alpha1.ProviderBtrfs
	}
	if mover != provider {
		return fmt.Errorf("the %s claim %s is on StorageClass %s, %s, which %s does not replicate: set spec.external.provider %s on the pair, or use a class %s replicates",
			side, claim, sc.Name, kind, provider, mover, provider)
	}
	return nil
}

// sideVolume checks a side's claim, and its class and volume where the
// revision declares them; it returns the volume and the class when they
// are declared.
func sideVolume(ctx context.Context, r client.Reader, ns string, s failoverv1alpha1.Side, side string) (*corev1.PersistentVolume, *storagev1.StorageClass, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := inRevision(ctx, r, ns, s.Claim, pvc, "the "+side+" claim"); err != nil {
		return nil, nil, err
	}
	var sc *storagev1.StorageClass
	if class := pvc.Spec.StorageClassName; class != nil && *class != "" {
		sc = &storagev1.StorageClass{}
		if err := r.Get(ctx, client.ObjectKey{Name: *class}, sc); err != nil {
			sc = nil
		} else if err := classOnNode(sc, s, side); err != nil {
			return nil, sc, err
		}
	}
	if pvc.Spec.VolumeName == "" {
		return nil, sc, nil // provisioned on the node that has room: nothing to check yet
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return nil, sc, nil //nolint:nilerr // a volume made outside Git is checked by the controller
	}
	if !rules.OnNode(pv, s.Node) {
		return nil, sc, fmt.Errorf("volume %s of the %s claim %s is not pinned to node %s by its node affinity", pv.Name, side, s.Claim, s.Node)
	}
	return pv, sc, nil
}

// classOnNode checks that a side's class can hold its volume on its
// node: one of strata's classes (btrfs, replicated by strata.dev/btrfs,
// or LVM, by strata.dev/lvm), and a node-local btrfs one's host the
// side's node.
func classOnNode(sc *storagev1.StorageClass, s failoverv1alpha1.Side, side string) error {
	if sc.Provisioner != storagev1alpha1.CSIDriver {
		return fmt.Errorf("the %s claim %s is on StorageClass %s of %s: strata's movers replicate strata's volumes; use a strata class on node %s",
			side, s.Claim, sc.Name, sc.Provisioner, s.Node)
	}
	if !rules.IsBtrfsClass(sc.Parameters) {
		return nil // an LVM class: its volumes are on the node the claim is first used on
	}
	if host := sc.Parameters[rules.HostNodeParameter]; host != "" && host != s.Node {
		return fmt.Errorf("the %s claim %s is on StorageClass %s, whose volumes are on node %s (%s), not on the %s node %s",
			side, s.Claim, sc.Name, host, rules.HostNodeParameter, side, s.Node)
	}
	return nil
}

func workloadUsesASide(ctx context.Context, r client.Reader, fo *failoverv1alpha1.Failover) error {
	var template *corev1.PodTemplateSpec
	switch fo.Spec.Workload.Kind {
	case "Deployment":
		d := &appsv1.Deployment{}
		if err := inRevision(ctx, r, fo.Namespace, fo.Spec.Workload.Name, d, "Deployment"); err != nil {
			return err
		}
		template = &d.Spec.Template
	case "StatefulSet":
		s := &appsv1.StatefulSet{}
		if err := inRevision(ctx, r, fo.Namespace, fo.Spec.Workload.Name, s, "StatefulSet"); err != nil {
			return err
		}
		template = &s.Spec.Template
	default:
		return fmt.Errorf("workload kind %q: use Deployment or StatefulSet", fo.Spec.Workload.Kind)
	}
	return rules.FailoverWorkload(fo, template)
}

// inRevision reads an object the Failover names, which must be in the
// same revision: applied without it, the Failover could not act.
func inRevision(ctx context.Context, r client.Reader, ns, name string, obj client.Object, what string) error {
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s is not in this revision", what, ns, name)
	}
	return err
}
