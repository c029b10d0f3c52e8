package btrfsnode

import "time"

// volumeRecord is a volume's metadata.json: what the store keeps of a
// volume. The node API's wire.Volume is what the store answers with: the
// record and where the volume is and how much it holds (fill). The two
// are separate types, so that the API can change without changing what
// is on disk, and the other way round; the fields they share keep one
// JSON name, and a record written when they were one type reads the same.
type volumeRecord struct {
	Name             string        `json:"name"`
	SizeBytes        int64         `json:"sizeBytes"`
	Compression      string        `json:"compression,omitempty"`
	CompressionLevel int           `json:"compressionLevel,omitempty"`
	NoCOW            bool          `json:"nocow,omitempty"`
	UID              int           `json:"uid"`
	GID              int           `json:"gid"`
	Mode             string        `json:"mode"`
	Source           *sourceRecord `json:"source,omitempty"`
	Clients          []string      `json:"clients,omitempty"`
	ExportID         uint16        `json:"exportId,omitempty"`
	CreatedAt        time.Time     `json:"createdAt"`
}

// sourceRecord is what a clone was made from.
type sourceRecord struct {
	Volume   string `json:"volume,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
}

// snapshotRecord is a snapshot's metadata.json.
type snapshotRecord struct {
	Name      string    `json:"name"`
	Volume    string    `json:"volume"`
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
}

func recordOfVolume(v Volume) volumeRecord {
	r := volumeRecord{Name: v.Name, SizeBytes: v.SizeBytes, Compression: v.Compression, CompressionLevel: v.CompressionLevel,
		NoCOW: v.NoCOW, UID: v.UID, GID: v.GID, Mode: v.Mode, Clients: v.Clients, ExportID: v.ExportID, CreatedAt: v.CreatedAt}
	if v.Source != nil {
		r.Source = &sourceRecord{Volume: v.Source.Volume, Snapshot: v.Source.Snapshot}
	}
	return r
}

// volume is the record as the API's Volume, before fill adds where it is.
func (r volumeRecord) volume() Volume {
	v := Volume{Name: r.Name, SizeBytes: r.SizeBytes, Compression: r.Compression, CompressionLevel: r.CompressionLevel,
		NoCOW: r.NoCOW, UID: r.UID, GID: r.GID, Mode: r.Mode, Clients: r.Clients, ExportID: r.ExportID, CreatedAt: r.CreatedAt}
	if r.Source != nil {
		v.Source = &Source{Volume: r.Source.Volume, Snapshot: r.Source.Snapshot}
	}
	return v
}

func recordOfSnapshot(s Snapshot) snapshotRecord {
	return snapshotRecord{Name: s.Name, Volume: s.Volume, SizeBytes: s.SizeBytes, CreatedAt: s.CreatedAt}
}

// snapshot is the record as the API's Snapshot, before fillSnapshot adds
// where it is.
func (r snapshotRecord) snapshot() Snapshot {
	return Snapshot{Name: r.Name, Volume: r.Volume, SizeBytes: r.SizeBytes, CreatedAt: r.CreatedAt}
}
