package core

import (
	"context"
	"time"
)

// Runtime is the only way core code starts an actor, reads the time, sleeps
// or waits for another actor. RealRuntime implements it with goroutines and
// the wall clock; package sim implements it with a seeded scheduler and a
// virtual clock.
type Runtime interface {
	// Now is the current time.
	Now() time.Time
	// Sleep blocks for d or until ctx is done, whichever comes first, and
	// returns ctx's error in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
	// Go starts fn as a new actor called name.
	Go(ctx context.Context, name string, fn func(ctx context.Context))
	// NewLock returns a mutual-exclusion lock whose acquisition is a blocking
	// point that observes ctx.
	NewLock(name string) Lock
	// NewEvent returns a one-shot event actors can wait for.
	NewEvent(name string) Event
}

// Event is a one-shot signal: once set it stays set, and every waiter, past
// or future, proceeds. It is the runtime's building block for futures and
// waiters.
type Event interface {
	// Set sets the event; setting it again does nothing. It never blocks.
	Set()
	// IsSet reports whether the event is set.
	IsSet() bool
	// Wait blocks until the event is set or ctx is done; in the latter case
	// it returns ctx's error.
	Wait(ctx context.Context) error
}

// Lock is a mutual-exclusion lock owned by a Runtime.
type Lock interface {
	// Lock blocks until the lock is held or ctx is done; in the latter case
	// it returns ctx's error and does not hold the lock.
	Lock(ctx context.Context) error
	// Unlock releases the lock. Unlocking a lock that is not held panics.
	Unlock()
}
