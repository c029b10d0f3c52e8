package dashboard

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
)

// Failovers is the replication and failover page.
type Failovers struct {
	Items  []FailoverView
	Pairs  []PairView
	Hidden bool
	At     time.Time
}

// FailoverView is one Failover: where its app runs, how old its backup
// is against maxDataAge, and the timeline of its latest failover.
type FailoverView struct {
	Namespace, Name, Phase, Active string
	Primary, Backup                string
	// DataAge is how old the backup's newest replica is (its
	// ReplicationDestination's last sync); Late marks one past MaxDataAge.
	DataAge, MaxDataAge time.Duration
	Synced, Late        bool
	// Steps are the latest failover's, from detection, at Detected.
	Steps              []Step
	Detected           time.Time
	DataAgeAtPromotion time.Duration
	FencedBy           string
}

// Step is one step of a failover: when, after detection.
type Step struct {
	Name  string
	After time.Duration
}

func (s *Server) failoversOf(ctx context.Context, u User) (Failovers, error) {
	now := s.now()
	out := Failovers{At: now}
	var fos failoverv1alpha1.FailoverList
	if err := s.Reader.List(ctx, &fos, readOnly); err != nil {
		return out, err
	}
	may := s.listable(ctx, u, failoverv1alpha1.GroupVersion.Group, "failovers")
	for _, fo := range fos.Items {
		if !may(fo.Namespace) {
			out.Hidden = true
			continue
		}
		out.Items = append(out.Items, s.failoverView(ctx, &fo, now))
	}
	pairs, hidden := s.pairsOf(ctx, u, fos.Items, now)
	out.Pairs, out.Hidden = pairs, out.Hidden || hidden
	return out, nil
}

// failoverView reads a Failover, and its backup's last sync from the
// ReplicationDestination it names.
func (s *Server) failoverView(ctx context.Context, fo *failoverv1alpha1.Failover, now time.Time) FailoverView {
	p := fo.Spec.Policy.WithDefaults()
	v := FailoverView{Namespace: fo.Namespace, Name: fo.Name, Phase: string(fo.Status.Phase), Active: string(fo.Status.Active),
		Primary: fo.Spec.Primary.Node, Backup: fo.Spec.Backup.Node, MaxDataAge: p.MaxDataAge.Duration, FencedBy: fo.Status.FencedBy}
	var dest volsyncv1alpha1.ReplicationDestination
	key := client.ObjectKey{Namespace: fo.Namespace, Name: fo.Spec.Replication.Destination}
	if err := s.Reader.Get(ctx, key, &dest); err == nil && dest.Status != nil && dest.Status.LastSyncTime != nil {
		v.Synced, v.DataAge = true, now.Sub(dest.Status.LastSyncTime.Time)
		v.Late = v.DataAge > v.MaxDataAge
	}
	v.Steps = timeline(fo.Status.Timestamps)
	if d := fo.Status.Timestamps.Detected; d != nil {
		v.Detected = d.Time
	}
	if fo.Status.DataAgeAtPromotion != nil {
		v.DataAgeAtPromotion = fo.Status.DataAgeAtPromotion.Duration
	}
	return v
}

// timeline is the latest failover's steps, each after its detection; none
// before a failover was detected.
func timeline(ts failoverv1alpha1.PhaseTimestamps) []Step {
	if ts.Detected == nil {
		return nil
	}
	var steps []Step
	for _, st := range []struct {
		name string
		at   *metav1.MicroTime
	}{{"detected", ts.Detected}, {"fenced", ts.Fenced}, {"promoted", ts.Promoted}, {"ready", ts.Started}, {"failed back", ts.FailedBack}} {
		if st.at != nil {
			steps = append(steps, Step{Name: st.name, After: st.at.Sub(ts.Detected.Time)})
		}
	}
	return steps
}
