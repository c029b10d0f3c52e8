package volumes

import (
	"errors"
	"fmt"
)

// Kind is what sort of failure an Error is; the HTTP API maps each to a
// status code.
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

func newError(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error { return newError(Invalid, format, args...) }

// KindOf is the Kind of err, 0 for an internal failure.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}
