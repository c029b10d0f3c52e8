package manager

import (
	"context"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// withoutFinalizerNameWarning returns a copy of cfg whose clients log the
// API server's warnings as controller-runtime does, one line each, except
// the warning that Flux's finalizer name is not domain-qualified. The API
// server sends it on every write that adds the finalizer, so a new cluster
// logged it once per Kustomization and GitRepository. The name is Flux's
// and strata keeps it, so that Flux and strata can hand objects to each
// other: no one running strata can act on the warning.
func withoutFinalizerNameWarning(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = warningFilter{next: log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{})}
	return cfg
}

// warningFilter passes every warning but the finalizer name's to next.
type warningFilter struct {
	next rest.WarningHandlerWithContext
}

// fluxFinalizerWarning begins the API server's warning about Flux's
// finalizer name ("metadata.finalizers: "<name>": prefer a domain-qualified
// finalizer name ...").
const fluxFinalizerWarning = `metadata.finalizers: "` + kustomization.Finalizer + `": `

func (f warningFilter) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, message string) {
	if strings.HasPrefix(message, fluxFinalizerWarning) {
		return
	}
	f.next.HandleWarningHeaderWithContext(ctx, code, agent, message)
}
