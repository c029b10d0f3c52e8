package lvm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// reportRows parses an lvm2 JSON report ({"report":[{"<kind>":[{...}]}]})
// into its rows of one kind.
func reportRows(out []byte, kind string) ([]map[string]string, error) {
	var doc struct {
		Report []map[string][]map[string]string `json:"report"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("reading lvm2 %s report: %w", kind, err)
	}
	var rows []map[string]string
	for _, r := range doc.Report {
		rows = append(rows, r[kind]...)
	}
	return rows, nil
}

// bytesField reads a size reported with --units b --nosuffix.
func bytesField(row map[string]string, field string) (uint64, error) {
	v := strings.TrimSpace(row[field])
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("lvm2 report field %s=%q is not a byte count: %w", field, v, err)
	}
	return n, nil
}

func percentField(row map[string]string, field string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(row[field]), 64)
	if err != nil {
		return 0
	}
	return v
}

func listField(row map[string]string, field string) []string {
	if row[field] == "" {
		return nil
	}
	return strings.Split(row[field], ",")
}
