package fault

import (
	"errors"
	"fmt"
)

// ErrInjected is wrapped by the error of a commit that a fail fault refused:
// nothing was persisted and no sequence number was consumed.
var ErrInjected = errors.New("fault: injected failure")

// ErrUncertain is wrapped by the error of a commit that an uncertain fault
// persisted and then reported as failed. The caller cannot know whether the
// batch is durable; it must stop using the handle and reopen, and the
// reopened store is the truth. The handle refuses every later Commit with an
// error wrapping ErrUncertain, so a harness that carries on is caught.
var ErrUncertain = errors.New("fault: commit outcome uncertain")

// ErrCrashed is wrapped by every call on a handle whose process died: a crash
// fault fired, or Reopen replaced the handle.
var ErrCrashed = errors.New("fault: process crashed")

// Error is what a fault makes a call return: the fault, the ordinal of the
// commit it hit and one of the sentinels above.
type Error struct {
	Fault  Fault
	Commit int   // ordinal of the commit through the handle, 1-based
	Err    error // ErrInjected, ErrUncertain or ErrCrashed
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: commit %d hit by %s", e.Err, e.Commit, e.Fault)
}

func (e *Error) Unwrap() error { return e.Err }

// PlanError reports an invalid plan and names the offending field.
type PlanError struct {
	Index  int    // the fault's position in Faults; -1 for the plan as a whole
	Field  string // the JSON name of the field: "name", "kind", "commit", …
	Reason string
}

func (e *PlanError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("fault: plan: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("fault: plan: faults[%d].%s: %s", e.Index, e.Field, e.Reason)
}
