package agent

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/fluxevents"
	"github.com/strata-gitops/strata/internal/scheme"
)

// recordEvents gives a btrfs host, which runs without a manager, the
// event recorder a manager would: Kubernetes events (a full filesystem,
// image jobs) on its node, and the same in Flux's format at
// --events-addr.
func (a *Agent) recordEvents(cfg *rest.Config, o Options) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	sch := scheme.New()
	rec, err := fluxevents.New(b.NewRecorder(sch, "strata-agent"), sch, ctrl.Log.WithName("events"), o.EventsAddr, "strata-agent")
	if err != nil {
		return err
	}
	a.events = rec
	a.run(func(ctx context.Context) error {
		b.StartRecordingToSink(ctx.Done())
		<-ctx.Done()
		b.Shutdown()
		return nil
	})
	return nil
}
