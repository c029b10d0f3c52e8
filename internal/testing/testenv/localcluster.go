package testenv

import (
	"os"
	"path/filepath"
)

// LocalClusterMissing names the first binary the local cluster needs that
// is not built (make test and make e2e build them all), or is empty.
func LocalClusterMissing() string {
	bin := filepath.Join(RepoRoot(), "bin")
	for _, need := range []string{"k8s/kubelet", "k8s/kubectl", "helm", "registry", "minio"} {
		if _, err := os.Stat(filepath.Join(bin, need)); err != nil {
			return "bin/" + need + " is not built (make test and make e2e build it)"
		}
	}
	return ""
}
