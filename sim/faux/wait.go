package faux

import (
	"context"
	"sync"
	"time"
)

// eitherCtx is done as soon as either of two contexts is: a stream waits
// with it so that cancelling the stream's ctx (from Stream) and cancelling
// the caller's ctx (from Next) both end the wait.
//
// Why not context.WithCancel plus context.AfterFunc: AfterFunc cancels from
// a goroutine of its own, which under the simulator is an unscheduled
// goroutine racing the scheduler, and a seed would no longer fix the run.
// The simulator decides whether a parked actor may run by calling Err, so
// Err here consults both parents synchronously. Done, which only the real
// runtime's Sleep calls, is built lazily from AfterFunc on both parents;
// Err closes it too, so "Err is non-nil exactly when Done is closed" holds.
type eitherCtx struct {
	context.Context // the primary: Next's ctx, whose values name the actor
	other           context.Context

	mu    sync.Mutex
	done  chan struct{}
	err   error
	stops []func() bool
}

func either(primary, other context.Context) *eitherCtx {
	return &eitherCtx{Context: primary, other: other}
}

func (c *eitherCtx) Deadline() (time.Time, bool) {
	d1, ok1 := c.Context.Deadline()
	d2, ok2 := c.other.Deadline()
	switch {
	case ok1 && ok2 && d2.Before(d1), !ok1:
		return d2, ok2
	}
	return d1, ok1
}

func (c *eitherCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.other.Value(key)
}

func (c *eitherCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		if err := c.Context.Err(); err != nil {
			c.cancelLocked(err)
		} else if err := c.other.Err(); err != nil {
			c.cancelLocked(err)
		}
	}
	return c.err
}

func (c *eitherCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return c.done
	}
	for _, parent := range []context.Context{c.Context, c.other} {
		c.stops = append(c.stops, context.AfterFunc(parent, func() { c.cancel(parent.Err()) }))
	}
	return c.done
}

func (c *eitherCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.cancelLocked(err)
	}
}

func (c *eitherCtx) cancelLocked(err error) {
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// release unregisters the AfterFuncs Done may have set up; call it when the
// wait is over.
func (c *eitherCtx) release() {
	c.mu.Lock()
	stops := c.stops
	c.stops = nil
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
