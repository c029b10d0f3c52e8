package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// auditPolicy logs every write request's metadata, so that a pass's writes
// can be attributed to the client that made them.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

func (b *bench) auditLog() string { return filepath.Join(b.dir, "audit.log") }

// writes counts the persisted writes of a pass: dry-runs and failed
// requests persist nothing and are left out.
type writes struct {
	controller int
	others     map[string]int
}

func (w writes) String() string {
	var others []string
	for agent, n := range w.others {
		others = append(others, fmt.Sprintf("%s %d", agent, n))
	}
	sort.Strings(others)
	s := fmt.Sprintf("writes by the controller: %d", w.controller)
	if len(others) > 0 {
		s += " (by others during the pass: " + strings.Join(others, ", ") + ")"
	}
	return s
}

type auditEvent struct {
	Verb           string    `json:"verb"`
	RequestURI     string    `json:"requestURI"`
	UserAgent      string    `json:"userAgent"`
	ReceivedAt     time.Time `json:"requestReceivedTimestamp"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// writesSince counts the writes received since start, those whose user
// agent starts with controllerAgent apart.
func (b *bench) writesSince(start time.Time, controllerAgent string) (writes, error) {
	w := writes{others: map[string]int{}}
	f, err := os.Open(b.auditLog())
	if err != nil {
		return w, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e auditEvent
		if json.Unmarshal(scanner.Bytes(), &e) != nil || e.ReceivedAt.Before(start) ||
			strings.Contains(e.RequestURI, "dryRun=") || e.ResponseStatus.Code >= 400 {
			continue
		}
		if strings.HasPrefix(e.UserAgent, controllerAgent) {
			w.controller++
		} else {
			w.others[strings.SplitN(e.UserAgent, "/", 2)[0]]++
		}
	}
	return w, scanner.Err()
}
