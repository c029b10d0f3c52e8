// Package groupcommit shares one run of an expensive step, such as a
// filesystem sync or an exporter's reload, among the callers that need it
// at the same time: a caller is done once a run that started after its
// change has finished, and changes made during a run are covered together
// by the next one.
package groupcommit

import "sync"

// Group hands out tickets for changes and runs the step that covers
// them. The zero Group is ready to use.
type Group struct {
	running sync.Mutex // one run at a time; the callers that wait queue here

	mu           sync.Mutex
	issued, done uint64 // the last ticket handed out, and the last a run covered
	err          error  // the error of the last run
}

// Ticket marks a change as made. Take it after the change: a run covers
// exactly the tickets issued before it started.
func (g *Group) Ticket() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.issued++
	return g.issued
}

// Wait returns once a run that covers ticket has finished, with the error
// of the last run; it runs the step itself when none that covers the
// ticket has started. A later run covers an earlier change too, so the
// last run's error is the one that says whether the change is served.
func (g *Group) Wait(ticket uint64, run func() error) error {
	g.running.Lock()
	defer g.running.Unlock()
	g.mu.Lock()
	if g.done >= ticket {
		err := g.err
		g.mu.Unlock()
		return err
	}
	covers := g.issued
	g.mu.Unlock()
	err := run()
	g.mu.Lock()
	g.done, g.err = covers, err
	g.mu.Unlock()
	return err
}

// Commit is Wait for a change just made.
func (g *Group) Commit(run func() error) error { return g.Wait(g.Ticket(), run) }
