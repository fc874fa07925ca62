package storage

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by every call on a closed backend.
var ErrClosed = errors.New("storage: closed")

// ErrHistoricalRead is returned for a read at a position of state that has no
// history (session, sticky conversation and scratch state).
var ErrHistoricalRead = errors.New("storage: historical read of state without history")

// ErrBadQuery wraps a query that cannot be answered as asked.
var ErrBadQuery = errors.New("storage: bad query")

// AddressError reports a malformed address.
type AddressError struct {
	Addr   Address
	Reason string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("storage: address %s: %s", e.Addr, e.Reason)
}

// BatchError reports a batch that storage rejected; nothing was written.
// Index is the offending write's position in the batch (-1 for the batch as
// a whole), Seq the sequence it would have had and Rule what it broke.
type BatchError struct {
	Index int
	Seq   ID
	Type  WriteType
	Rule  string
	// Err is an underlying error, when there is one (a bad address, say).
	Err error
}

func (e *BatchError) Error() string {
	if e.Index < 0 {
		return "storage: batch rejected: " + e.Rule
	}
	msg := fmt.Sprintf("storage: batch rejected: write %d (%s, seq %d): %s", e.Index, e.Type, e.Seq, e.Rule)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *BatchError) Unwrap() error { return e.Err }

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadQuery}, args...)...)
}

// CheckCursor validates a cursor's limit and bounds.
func CheckCursor(c Cursor) error {
	if c.Limit < 1 || c.Limit > PageLimitMax {
		return badQuery("limit %d outside 1..%d", c.Limit, PageLimitMax)
	}
	if c.After < 0 || c.Before < 0 {
		return badQuery("negative cursor")
	}
	return nil
}

// CheckTaskQuery is CheckCursor for a task scan, plus its role filter.
func CheckTaskQuery(q TaskQuery) error {
	if err := CheckCursor(q.Cursor); err != nil {
		return err
	}
	if q.Role != "" && !q.Role.Valid() {
		return badQuery("unknown role %q", q.Role)
	}
	return nil
}
