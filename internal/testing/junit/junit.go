// Package junit reads the JUnit XML reports ginkgo suites write
// (csi-sanity, Kubernetes' e2e.test), for tests that check their outcome.
package junit

import (
	"encoding/xml"
	"fmt"
	"os"
)

// Case is one spec of a report.
type Case struct {
	Name string `xml:"name,attr"`
	// Skipped and Failure hold the message of a skipped or failed spec.
	Skipped *Message `xml:"skipped"`
	Failure *Message `xml:"failure"`
	Error   *Message `xml:"error"`
}

// Message is why a spec was skipped or failed.
type Message struct {
	Message string `xml:"message,attr"`
}

// Failed says whether the spec failed or errored.
func (c Case) Failed() bool { return c.Failure != nil || c.Error != nil }

// Read returns every spec of the report at path, suite after suite.
func Read(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var report struct {
		Suites []struct {
			Cases []Case `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("reading the report %s: %w", path, err)
	}
	var cases []Case
	for _, s := range report.Suites {
		cases = append(cases, s.Cases...)
	}
	return cases, nil
}
