package plan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/plan/risk"
)

// ConfigFile is the repository's own plan settings, at its root: the
// data-protection kinds it adds (docs/plan.md, "Data-protection kinds").
const ConfigFile = ".strata-plan.yaml"

// config is what ConfigFile holds.
type config struct {
	DataProtection []risk.Protector `json:"dataProtection"`
}

// Protectors are the data-protection kinds a plan of the repository at
// repoDir knows: strata's table, the repository's ConfigFile, and flags
// (GROUP/KIND[=WHAT IT DOES], --protects-data), the later of one kind
// winning. A ConfigFile that cannot be read stops the plan, naming it.
func Protectors(repoDir string, flags []string) (risk.Protectors, error) {
	var more []risk.Protector
	path := filepath.Join(repoDir, ConfigFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var c config
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i, p := range c.DataProtection {
			if p.Group == "" || p.Kind == "" || p.Does == "" {
				return nil, fmt.Errorf("%s: dataProtection[%d] needs group, kind and does (what its objects do, such as backups)", path, i)
			}
		}
		more = c.DataProtection
	}
	for _, f := range flags {
		p, err := risk.ParseProtector(f)
		if err != nil {
			return nil, fmt.Errorf("--protects-data %w", err)
		}
		more = append(more, p)
	}
	return risk.NewProtectors(more...), nil
}
