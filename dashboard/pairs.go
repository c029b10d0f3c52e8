package dashboard

import (
	"context"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/rules"
)

// PairView is one replication pair: a ReplicationSource and the
// ReplicationDestination its parameters name.
type PairView struct {
	Namespace, Source, Destination, SourceClaim, Provider string
	// LastSync is when the destination last took a replica; DataAge how
	// long ago that was, Late past the MaxDataAge of the Failover naming
	// the pair (zero without one).
	LastSync            string
	DataAge, MaxDataAge time.Duration
	Synced, Late        bool
	// StreamBytes is the last sync's stream; SourceReplica and
	// DestinationReplica the newest replica each side holds.
	StreamBytes                       string
	SourceReplica, DestinationReplica string
	Paused                            bool
}

// pairsOf are the pairs of the namespaces u may list ReplicationSources
// in, each against the maxDataAge of the Failover that names it.
func (s *Server) pairsOf(ctx context.Context, u User, fos []failoverv1alpha1.Failover, now time.Time) (pairs []PairView, hidden bool) {
	var sources volsyncv1alpha1.ReplicationSourceList
	var dests volsyncv1alpha1.ReplicationDestinationList
	for _, l := range []client.ObjectList{&sources, &dests} {
		if s.Reader.List(ctx, l, readOnly) != nil {
			return nil, false
		}
	}
	destOf := map[string]*volsyncv1alpha1.ReplicationDestination{}
	for i, d := range dests.Items {
		destOf[d.Namespace+"/"+d.Name] = &dests.Items[i]
	}
	maxAge := map[string]time.Duration{}
	for _, fo := range fos {
		maxAge[fo.Namespace+"/"+fo.Spec.Replication.Source] = fo.Spec.Policy.WithDefaults().MaxDataAge.Duration
	}
	may := s.listable(ctx, u, volsyncv1alpha1.GroupVersion.Group, "replicationsources")
	for _, rs := range sources.Items {
		if !may(rs.Namespace) {
			hidden = true
			continue
		}
		key := rs.Namespace + "/" + rs.Name
		p := PairView{Namespace: rs.Namespace, Source: rs.Name, SourceClaim: rs.Spec.SourcePVC, Paused: rs.Spec.Paused, MaxDataAge: maxAge[key]}
		if rs.Spec.External != nil {
			p.Provider, p.Destination = rs.Spec.External.Provider, rs.Spec.External.Parameters[rules.ParamDestination]
		}
		if rs.Status != nil {
			p.SourceReplica = rs.Status.External["replica"]
			if b, err := strconv.ParseInt(rs.Status.External["streamBytes"], 10, 64); err == nil {
				p.StreamBytes = humanBytes(b)
			}
		}
		if d := destOf[rs.Namespace+"/"+p.Destination]; d != nil && d.Status != nil {
			p.DestinationReplica = d.Status.External["replica"]
			if t := d.Status.LastSyncTime; t != nil {
				p.Synced, p.LastSync, p.DataAge = true, t.UTC().Format(time.RFC3339), now.Sub(t.Time)
				p.Late = p.MaxDataAge > 0 && p.DataAge > p.MaxDataAge
			}
		}
		pairs = append(pairs, p)
	}
	return pairs, hidden
}

// humanBytes writes a byte count in binary units, as a person reads it.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f, u = f/1024, u+1
	}
	if u == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[u]
}
