package risk

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Protector is a kind whose objects protect data by their role: they
// replicate it, back it up or snapshot it. Removing one, or pausing it,
// loses no data at once, but stops what a reviewer relies on to get it
// back: the plan calls it disruptive.
type Protector struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	// Does is what its objects do, in the reason: "backups", "snapshots".
	Does string `json:"does"`
	// Of is the field naming what it protects (spec.sourcePVC); empty:
	// its namespace, or the cluster for a cluster-wide kind.
	Of string `json:"of,omitempty"`
	// Paused is the field that stops it when true (spec.paused); empty:
	// it has none.
	Paused string `json:"paused,omitempty"`
}

// DataProtectors are the kinds known by role: VolSync's and strata's
// replication, and the common backup and snapshot operators. Users add
// theirs (docs/plan.md, "Data-protection kinds").
var DataProtectors = []Protector{
	{Group: "volsync.backube", Kind: "ReplicationSource", Does: "replication or backups", Of: "spec.sourcePVC", Paused: "spec.paused"},
	{Group: "volsync.backube", Kind: "ReplicationDestination", Does: "replica", Paused: "spec.paused"},
	{Group: "failover.strata.dev", Kind: "Failover", Does: "replication and failover", Of: "spec.primary.claim"},
	{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshotClass", Does: "snapshots", Of: "driver"},
	{Group: "velero.io", Kind: "Schedule", Does: "scheduled backups", Paused: "spec.paused"},
	{Group: "velero.io", Kind: "Backup", Does: "backup"},
	{Group: "velero.io", Kind: "BackupStorageLocation", Does: "backups' storage"},
	{Group: "k8up.io", Kind: "Schedule", Does: "scheduled backups"},
	{Group: "k8up.io", Kind: "Backup", Does: "backup"},
	{Group: "snapscheduler.backube", Kind: "SnapshotSchedule", Does: "scheduled snapshots", Paused: "spec.disabled"},
	{Group: "longhorn.io", Kind: "RecurringJob", Does: "scheduled snapshots and backups"},
	{Group: "postgresql.cnpg.io", Kind: "ScheduledBackup", Does: "scheduled database backups", Of: "spec.cluster.name", Paused: "spec.suspend"},
	{Group: "stash.appscode.com", Kind: "BackupConfiguration", Does: "backups", Of: "spec.target.ref.name", Paused: "spec.paused"},
	{Group: "config.kio.kasten.io", Kind: "Policy", Does: "backups"},
	{Group: "gemini.fairwinds.com", Kind: "SnapshotGroup", Does: "scheduled snapshots", Of: "spec.persistentVolumeClaim.claimName"},
}

// Protectors are the data-protection kinds a plan knows, by group and kind.
type Protectors map[schema.GroupKind]Protector

// NewProtectors is DataProtectors and more, the later of one kind
// winning.
func NewProtectors(more ...Protector) Protectors {
	ps := Protectors{}
	for _, p := range append(append([]Protector(nil), DataProtectors...), more...) {
		ps[schema.GroupKind{Group: p.Group, Kind: p.Kind}] = p
	}
	return ps
}

// ParseProtector reads GROUP/KIND[=WHAT IT DOES], as --protects-data
// takes it: backup.example.com/Policy=backups.
func ParseProtector(s string) (Protector, error) {
	kind, does, _ := strings.Cut(s, "=")
	group, k, ok := strings.Cut(kind, "/")
	if !ok || k == "" || strings.Contains(k, "/") {
		return Protector{}, fmt.Errorf("%q: give GROUP/KIND[=what it does], such as backup.example.com/Policy=backups", s)
	}
	if does == "" {
		does = "data protection"
	}
	return Protector{Group: group, Kind: k, Does: does}, nil
}

// Sorted lists the kinds by group and kind, for the docs and help.
func (ps Protectors) Sorted() []Protector {
	out := make([]Protector, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Group+"/"+out[i].Kind < out[j].Group+"/"+out[j].Kind
	})
	return out
}

// Removal says what removing o stops, or "" when o protects nothing.
func (ps Protectors) Removal(o *unstructured.Unstructured) string {
	p, ok := ps[o.GroupVersionKind().GroupKind()]
	if !ok {
		return ""
	}
	return fmt.Sprintf("removing %s %s stops the %s of %s", p.Kind, o.GetName(), p.Does, p.target(o))
}

// Pausing says what a change from b to h stops by pausing the object, or
// "" when it does not.
func (ps Protectors) Pausing(b, h *unstructured.Unstructured) string {
	p, ok := ps[h.GroupVersionKind().GroupKind()]
	if !ok || p.Paused == "" {
		return ""
	}
	path := strings.Split(p.Paused, ".")
	was, _, _ := unstructured.NestedBool(b.Object, path...)
	now, _, _ := unstructured.NestedBool(h.Object, path...)
	if was || !now {
		return ""
	}
	return fmt.Sprintf("%s: true pauses the %s of %s", p.Paused, p.Does, p.target(h))
}

// target names what the object protects.
func (p Protector) target(o *unstructured.Unstructured) string {
	if p.Of != "" {
		if v, ok, _ := unstructured.NestedString(o.Object, strings.Split(p.Of, ".")...); ok && v != "" {
			return fmt.Sprintf("%s (%s)", v, p.Of)
		}
	}
	if o.GetNamespace() != "" {
		return "namespace " + o.GetNamespace()
	}
	return "the cluster"
}

// Raise makes class at least to, adding the reason: a protection's
// finding beside what Classify or OfDeletion found.
func Raise(class string, reasons []string, to, reason string) (string, []string) {
	rank := func(c string) int {
		for i, r := range RiskClasses {
			if r == c {
				return i
			}
		}
		return len(RiskClasses)
	}
	if rank(to) < rank(class) {
		class = to
	}
	return class, append(reasons, reason)
}
