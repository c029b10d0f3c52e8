package btrfsnode

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// A record written when the store kept the API's Volume on disk, with
// the fields fill adds, reads as the same volume; a record written now
// holds none of those fields.
func TestARecordReadsAsTheVolumeItWasWrittenFrom(t *testing.T) {
	made := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	v := Volume{Name: "db", SizeBytes: 1 << 30, Compression: "zstd", CompressionLevel: 3, NoCOW: true, UID: 999, GID: 999,
		Mode: "0750", Source: &Source{Snapshot: "nightly"}, Clients: []string{"10.0.0.7"}, ExportID: 12, CreatedAt: made}
	old := v
	old.Path, old.Node, old.UsedBytes, old.ExportPath = "", "", 0, "" // as the store wrote it then
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var rec volumeRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if got := rec.volume(); !reflect.DeepEqual(got, v) {
		t.Fatalf("an old record reads as %+v, want %+v", got, v)
	}
	now, err := json.Marshal(recordOfVolume(Volume{Name: "db", Path: "/srv/x/data", Node: "a", UsedBytes: 5, ExportPath: "/x"}))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(now, &fields); err != nil {
		t.Fatal(err)
	}
	for _, filled := range []string{"path", "node", "usedBytes", "exportPath"} {
		if _, ok := fields[filled]; ok {
			t.Errorf("a record holds %q, which fill adds when read", filled)
		}
	}
	snap := Snapshot{Name: "nightly", Volume: "db", SizeBytes: 1 << 20, CreatedAt: made}
	if got := recordOfSnapshot(snap).snapshot(); !reflect.DeepEqual(got, snap) {
		t.Fatalf("a snapshot's record reads as %+v, want %+v", got, snap)
	}
}
