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

// auditEverything logs every request but watches, for -requests.
const auditEverything = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: None
  verbs: [watch]
- level: Metadata
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

// writeVerbs are the verbs that change what the server stores; with
// -requests the audit log holds reads too.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

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
		if json.Unmarshal(scanner.Bytes(), &e) != nil || e.ReceivedAt.Before(start) || !writeVerbs[e.Verb] ||
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

// printRequests prints the controller's requests since start by verb and
// resource, per Kustomization: where a pass spends the API server's time.
func (b *bench) printRequests(start time.Time, controllerAgent string) error {
	f, err := os.Open(b.auditLog())
	if err != nil {
		return err
	}
	defer f.Close()
	counts := map[string]int{}
	total := 0
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e auditEvent
		if json.Unmarshal(scanner.Bytes(), &e) != nil || e.ReceivedAt.Before(start) || !strings.HasPrefix(e.UserAgent, controllerAgent) {
			continue
		}
		key := e.Verb + " " + resourceOf(e.RequestURI)
		if strings.Contains(e.RequestURI, "dryRun=") {
			key += " (dry-run)"
		}
		if e.ResponseStatus.Code >= 400 {
			key += fmt.Sprintf(" (%d)", e.ResponseStatus.Code)
		}
		counts[key]++
		total++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	fmt.Printf("  controller requests: %d, %.1f per Kustomization\n", total, float64(total)/float64(b.kustomizations))
	for _, k := range keys {
		fmt.Printf("    %6d  %.2f/ks  %s\n", counts[k], float64(counts[k])/float64(b.kustomizations), k)
	}
	return scanner.Err()
}

// resourceOf is the resource (and subresource) a request URI names.
func resourceOf(uri string) string {
	path, _, _ := strings.Cut(uri, "?")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	if len(parts) > 0 && parts[0] == "apis" && len(parts) > 2 {
		parts = parts[3:]
	} else if len(parts) > 1 {
		parts = parts[2:]
	}
	if len(parts) > 1 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}
