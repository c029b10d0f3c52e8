package guest

import (
	"strings"
	"testing"
)

// The guest's -test.v output (streamed: a test's lines come before the
// end lines its parent prints at once) is read into each test's outcome, duration
// and lines, nested subtests and all, with the init's exit line.
func TestTheGuestsOutputIsReadTestByTest(t *testing.T) {
	out := strings.Join([]string{
		"strata-guest: insmod x failed",
		"=== RUN   TestA",
		"=== RUN   TestA/one",
		"    a_test.go:10: a line of one",
		"=== RUN   TestA/one/deep",
		"    a_test.go:12: skipped for a reason",
		"--- FAIL: TestA (1.50s)",
		"    --- PASS: TestA/one (1.00s)",
		"        --- SKIP: TestA/one/deep (0.20s)",
		"=== RUN   TestB",
		"    b_test.go:3: b says",
		"--- PASS: TestB (0.01s)",
		"FAIL",
		"strata-guest-exit 1\r",
	}, "\n")
	r := parse([]byte(out), "")
	if !r.ended || r.code != 1 {
		t.Fatalf("ended %v with %d, want the exit line's 1", r.ended, r.code)
	}
	if got := strings.Join(r.childrenOf(""), " "); got != "TestA TestB" {
		t.Fatalf("top-level tests %q", got)
	}
	for name, want := range map[string]string{"TestA": "FAIL 1.50s", "TestA/one": "PASS 1.00s", "TestA/one/deep": "SKIP 0.20s", "TestB": "PASS 0.01s"} {
		if res := r.byName[name]; res == nil || res.status+" "+res.duration != want {
			t.Errorf("%s: %+v, want %s", name, res, want)
		}
	}
	if got := r.byName["TestA/one"].output; len(got) != 1 || !strings.Contains(got[0], "a line of one") {
		t.Errorf("TestA/one's lines: %q", got)
	}
	if got := r.byName["TestA/one/deep"].output; len(got) != 1 || !strings.Contains(got[0], "skipped for a reason") {
		t.Errorf("TestA/one/deep's lines: %q", got)
	}
	if got := r.byName[""].output; len(got) != 1 || !strings.Contains(got[0], "insmod") {
		t.Errorf("the lines before any test: %q", got)
	}
}

// A guest that never wrote its exit line did not end its test.
func TestAGuestWithoutItsExitLineDidNotEnd(t *testing.T) {
	r := parse([]byte("=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n"), "TestA")
	if r.ended {
		t.Fatal("a run without the exit line was taken as ended")
	}
}
