package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// Claim is a claim of strata's CSI driver bound to its volume, as the
// external provisioner and the PV controller leave it: a PV named
// namespace-name with the volume handle and context, pinned to Node by
// its hostname, and the claim bound to it.
type Claim struct {
	Namespace, Name, Node, Class string
	Handle                       string
	Attributes                   map[string]string
	Size                         resource.Quantity
}

// BindClaim makes the claim's PV and the claim, Bound; the PV goes when
// the test ends.
func BindClaim(t testing.TB, c client.Client, cl Claim) *corev1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: cl.Namespace + "-" + cl.Name}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: cl.Size}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: storagev1alpha1.CSIDriver, VolumeHandle: cl.Handle, VolumeAttributes: cl.Attributes}},
		StorageClassName: cl.Class,
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{cl.Node}}}}}}},
	}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: cl.Namespace, Name: cl.Name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &cl.Class, VolumeName: pv.Name,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: cl.Size}},
	}}
	for _, o := range []client.Object{pv, pvc} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pv) })
	pvc.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	return pv
}
