package delta

import (
	"errors"
	"fmt"
)

// The classes of rejected op. Every *OpError wraps exactly one of them, so
// callers can tell them apart with errors.Is.
var (
	// ErrMalformed: the op is wrong on its own, whatever it is applied to —
	// an unknown verb, a wrong arity, a bad path segment, a negative count,
	// a payload that is not a value.
	ErrMalformed = errors.New("malformed op")
	// ErrPath: the path does not lead anywhere in the value — a missing key,
	// a key on an array or an index on an object, a step into a scalar.
	ErrPath = errors.New("unresolvable path")
	// ErrRange: an index or count lies outside its target.
	ErrRange = errors.New("out of range")
	// ErrType: the target has the wrong type for the verb, such as an append
	// to a number or a splice of an object.
	ErrType = errors.New("wrong target type")
)

// OpError is why an op was rejected.
type OpError struct {
	// Index is the op's position in its batch, or -1 when the op was not
	// part of one (a Tracker mutation, a single Op's UnmarshalJSON, a batch
	// that is not even a JSON array).
	Index int
	// Op is the op's verb, or "" when it could not be read.
	Op string
	// Reason says what is wrong, in words.
	Reason string
	// Err is one of ErrMalformed, ErrPath, ErrRange and ErrType.
	Err error
}

func (e *OpError) Error() string {
	switch {
	case e.Index >= 0 && e.Op == "":
		return fmt.Sprintf("delta: op %d: %s", e.Index, e.Reason)
	case e.Index >= 0:
		return fmt.Sprintf("delta: op %d (%s): %s", e.Index, e.Op, e.Reason)
	case e.Op != "":
		return fmt.Sprintf("delta: %s: %s", e.Op, e.Reason)
	default:
		return "delta: " + e.Reason
	}
}

func (e *OpError) Unwrap() error { return e.Err }

// fault makes an OpError that a caller places in its batch (Index, Op).
func fault(class error, format string, args ...any) *OpError {
	return &OpError{Index: -1, Reason: fmt.Sprintf(format, args...), Err: class}
}

// at places an error at position i of a batch, as op verb.
func (e *OpError) at(i int, verb Verb) *OpError {
	e.Index = i
	if e.Op == "" {
		e.Op = string(verb)
	}
	return e
}

// assert panics when a broken invariant of this package shows itself; it is
// never used for bad input.
func assert(ok bool, invariant string) {
	if !ok {
		panic("delta: broken invariant: " + invariant)
	}
}
