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
		if e.Err != nil {
			return "storage: batch rejected: " + e.Rule + ": " + e.Err.Error()
		}
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

// CheckCursor validates a cursor's limit and bounds, after Defaulted: a
// limit below 1 (a negative one) or above PageLimitMax is a bad query.
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

// ErrLocked is what opening a session that another writer holds returns
// (wrapped in a *LockedError): a session has exactly one writer (DESIGN
// §9a), and a second one would interleave its commits with the first's.
var ErrLocked = errors.New("storage: the session is held by another writer")

// LockedError names the session a second writer tried to open and who
// holds it.
type LockedError struct {
	// Session is the session's file, or the file and session name.
	Session string
	// Holder says who holds it as far as known: "pid 4242", "another handle
	// in this process".
	Holder string
}

func (e *LockedError) Error() string {
	msg := fmt.Sprintf("storage: %s is held by another writer", e.Session)
	if e.Holder != "" {
		msg += " (" + e.Holder + ")"
	}
	return msg
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// BatchBytesMax bounds one batch as a durable backend encodes it: the JSON
// line a JSONL session writes, the JSON a SQLite session stores. Readers
// accept exactly this much, so a batch a backend acknowledges is always one
// it can read back.
const BatchBytesMax = 256 << 20

// BatchTooLargeError rejects a batch over BatchBytesMax before anything is
// written.
type BatchTooLargeError struct {
	Bytes int // the batch encoded
	Max   int // the limit it broke
}

func (e *BatchTooLargeError) Error() string {
	return fmt.Sprintf("storage: batch of %d bytes encoded is over the limit of %d", e.Bytes, e.Max)
}

// PoisonedError is what every commit of a backend returns after a write
// failed in a way it could not undo (the file may hold part of a batch):
// Err is that first failure. Reopening recovers from what is on disk.
type PoisonedError struct{ Err error }

func (e *PoisonedError) Error() string {
	return "storage: an earlier write failed and could not be undone; reopen the session: " + e.Err.Error()
}

func (e *PoisonedError) Unwrap() error { return e.Err }
