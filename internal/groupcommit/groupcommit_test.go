package groupcommit

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// A caller returns only after a run that started after its change, and
// the callers that arrive during a run share the next one: with the
// first run held until every caller has made its change, two runs serve
// them all.
func TestConcurrentCallersShareRunsThatStartAfterTheirChanges(t *testing.T) {
	const callers = 200
	var g Group
	var changes, covered, runs atomic.Int64 // covered: the most changes a finished run saw
	allIn := make(chan struct{})
	run := func() error {
		if runs.Add(1) == 1 {
			<-allIn
		}
		covered.Store(changes.Load())
		return nil
	}
	var wg sync.WaitGroup
	var late atomic.Int64
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := changes.Add(1)
			if mine == callers {
				close(allIn)
			}
			if err := g.Commit(run); err != nil {
				t.Error(err)
			}
			if covered.Load() < mine {
				late.Add(1)
			}
		}()
	}
	wg.Wait()
	if late.Load() > 0 {
		t.Errorf("%d callers returned before a run covered their change", late.Load())
	}
	if runs.Load() > 2 {
		t.Errorf("%d runs for %d callers who all arrived during the first: the waiting ones did not share one", runs.Load(), callers)
	}
}

// A caller whose change a finished run covers gets that run's error
// without running again; a later change gets a run of its own.
func TestACoveredTicketGetsTheLastRunsError(t *testing.T) {
	var g Group
	boom := errors.New("boom")
	first := g.Ticket()
	second := g.Ticket()
	runs := 0
	if err := g.Wait(first, func() error { runs++; return boom }); !errors.Is(err, boom) {
		t.Fatalf("first: %v, want boom", err)
	}
	if err := g.Wait(second, func() error { runs++; return nil }); !errors.Is(err, boom) || runs != 1 {
		t.Fatalf("second, covered by the first run: %v after %d runs, want boom after 1", err, runs)
	}
	if err := g.Commit(func() error { runs++; return nil }); err != nil || runs != 2 {
		t.Fatalf("a new change: %v after %d runs, want nil after 2", err, runs)
	}
}
