// Package benchenv starts what the benchmarks that run bin/strata
// against an API server share: a local control plane with strata's CRDs,
// a client of strata's scheme, and a kubeconfig file for the binary.
package benchenv

import (
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/controlplane"
	"github.com/strata-gitops/strata/internal/scheme"
)

// Env is a started control plane.
type Env struct {
	*controlplane.ControlPlane
	Client client.Client
	// Kubeconfig is the administrator's kubeconfig, a file in the
	// directory Start was given.
	Kubeconfig string
}

// Start starts a control plane from bin/k8s under the working directory
// (the source tree's root), with the chart's CRDs and the API server
// flags given, and writes its kubeconfig into dir. Stop it with Stop.
func Start(dir string, apiServerFlags map[string]string) (*Env, error) {
	cp, err := controlplane.Start(controlplane.Options{AssetsDir: filepath.Join("bin", "k8s"),
		CRDDirs: []string{filepath.Join("charts", "strata", "crds")}, APIServerFlags: apiServerFlags})
	if err != nil {
		return nil, err
	}
	e := &Env{ControlPlane: cp, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if e.Client, err = client.New(cp.Config, client.Options{Scheme: scheme.New()}); err == nil {
		var kubeconfig []byte
		if kubeconfig, err = cp.Kubeconfig(); err == nil {
			err = os.WriteFile(e.Kubeconfig, kubeconfig, 0o600)
		}
	}
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return e, nil
}
