// Package contract is the storage contract of a node: what each backend
// on the node (btrfsnode, lvmnode) offers the node API and the movers,
// and nothing of how. It holds the interfaces (volumes and snapshots,
// replication pairs with their replicas, sync, promotion and fence), the
// kinds of failure a caller can act on, and the rules names follow. It
// imports no backend and no transport; contracttest holds the suite every
// backend passes.
package contract

import (
	"errors"
	"fmt"
)

// Kind is what sort of failure an Error is; the node API maps each to an
// HTTP status code.
type Kind int

// The kinds of failure.
const (
	Invalid   Kind = iota + 1 // the request is malformed
	NotFound                  // the volume or snapshot does not exist
	Conflict                  // it exists with other properties
	InUse                     // it has snapshots or exports
	NoSpace                   // the filesystem has no room
	Forbidden                 // the tenant may not do this
)

// Error is a failure the caller can act on.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf is an Error of kind, its message formatted.
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Invalidf is an Invalid Error, its message formatted.
func Invalidf(format string, args ...any) error { return Errorf(Invalid, format, args...) }

// KindOf is the Kind of err, 0 for an internal failure.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}
