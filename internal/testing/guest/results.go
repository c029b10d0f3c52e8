package guest

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// results are the outcomes and output of a test and its subtests in the
// guest, read from its -test.v output.
type results struct {
	byName map[string]*result
	order  []string // names in the order they started
	code   int      // the test binary's exit code
	ended  bool     // the guest's init said the binary ended
}

// result is one test's or subtest's outcome and output.
type result struct {
	status   string // PASS, FAIL or SKIP; "" if it never ended
	duration string // as the guest's go test wrote it
	output   []string
}

var (
	runLine = regexp.MustCompile(`^=== (RUN|CONT|PAUSE|NAME)\s+(\S+)$`)
	endLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([^)]*)\)`)
)

// parse reads -test.v output: each test's lines (after its === line, up
// to the next), each test's end, and the init's exit line.
func parse(out []byte, top string) *results {
	r := &results{byName: map[string]*result{}}
	current := top
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if rest, ok := strings.CutPrefix(line, exitMark); ok {
			_, err := fmt.Sscan(rest, &r.code)
			r.ended = err == nil
			continue
		}
		if m := runLine.FindStringSubmatch(line); m != nil {
			current = m[2]
			r.get(current)
			continue
		}
		if m := endLine.FindStringSubmatch(line); m != nil {
			r.get(m[2]).status, r.get(m[2]).duration = m[1], m[3]
			current = parentOf(m[2], top)
			continue
		}
		if line == "PASS" || line == "FAIL" {
			continue
		}
		r.get(current).output = append(r.get(current).output, line)
	}
	return r
}

func (r *results) get(name string) *result {
	if r.byName[name] == nil {
		r.byName[name] = &result{}
		r.order = append(r.order, name)
	}
	return r.byName[name]
}

func parentOf(name, top string) string {
	if i := strings.LastIndex(name, "/"); i > 0 {
		return name[:i]
	}
	return top
}

// replay logs name's output and runs its subtests as t's, each passing,
// failing or skipping as it did in the guest. Name "" is the test
// binary: its tests are t's subtests.
func (r *results) replay(t *testing.T, name string) {
	t.Helper()
	res := r.byName[name]
	if res == nil {
		res = &result{}
	}
	if len(res.output) > 0 {
		t.Log("in the guest:\n" + strings.Join(res.output, "\n"))
	}
	for _, child := range r.childrenOf(name) {
		if child == t.Name() {
			continue
		}
		t.Run(strings.TrimPrefix(child, name+"/"), func(t *testing.T) {
			if d := r.byName[child].duration; d != "" {
				t.Logf("took %s in the guest", d)
			}
			r.replay(t, child)
			switch r.byName[child].status {
			case "FAIL", "":
				t.Fail()
			case "SKIP":
				t.SkipNow()
			}
		})
	}
	if res.status == "FAIL" {
		t.Fail()
	}
}

// childrenOf is name's direct subtests, in the order they started.
func (r *results) childrenOf(name string) []string {
	var out []string
	for _, n := range r.order {
		rest, ok := strings.CutPrefix(n, name+"/")
		if name == "" {
			rest, ok = n, true
		}
		if ok && n != "" && !strings.Contains(rest, "/") {
			out = append(out, n)
		}
	}
	return out
}
