package controller

import (
	corev1 "k8s.io/api/core/v1"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/objects"
)

// addRunner adds the runner sidecar and the init containers to a
// worker's pods, with their images pinned as the worker's own is.
func addRunner(r *Reconciler, s *scope, tmpl *corev1.PodTemplateSpec) error {
	w := s.obj.(*bbv1.BuildbarnWorker).Spec.WorkerExtras
	runner, err := objects.ResolveImage("spec.runnerImage", w.RunnerImage, "", "", "the runner")
	if err != nil {
		return refusal{"ImageNotPinned", err}
	}
	installer, err := objects.ResolveImage("spec.runnerInstallerImage", w.RunnerInstallerImage, s.spec.Release, r.ImageRepository, objects.RunnerInstallerImage)
	if err != nil {
		return refusal{"ImageNotPinned", err}
	}
	volumeInit := w.VolumeInitImage
	if volumeInit == "" {
		volumeInit = objects.VolumeInitImage
	}
	init, err := objects.ResolveImage("spec.volumeInitImage", volumeInit, "", "", "volume-init")
	if err != nil {
		return refusal{"ImageNotPinned", err}
	}
	objects.AddRunner(tmpl, objects.WorkerImages{Runner: runner.Ref, RunnerInstaller: installer.Ref, VolumeInit: init.Ref, RunnerResources: w.RunnerResources})
	return nil
}
