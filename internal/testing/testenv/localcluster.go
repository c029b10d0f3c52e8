package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// LocalClusterMissing names the first binary the local cluster needs that
// is not built (make test and make e2e build them all), or is empty.
func LocalClusterMissing() string {
	bin := filepath.Join(RepoRoot(), "bin")
	for _, need := range []string{"k8s/kubelet", "k8s/kubectl", "helm", "sidecars/csi-provisioner"} {
		if _, err := os.Stat(filepath.Join(bin, need)); err != nil {
			return "bin/" + need + " is not built (make test and make e2e build it)"
		}
	}
	return ""
}

// BuildStrata builds bin/strata from the source tree, which the local
// cluster's strata image holds.
func BuildStrata() error {
	root := RepoRoot()
	build := exec.Command("go", "build", "-o", filepath.Join(root, "bin", "strata"), "./cmd/strata")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building strata: %v: %s", err, out)
	}
	return nil
}
