package core

import (
	"context"
	"sync"
	"time"

	"github.com/pico-go/pico/internal/gopool"
)

// RealRuntime returns the runtime of an ordinary process: goroutines, the
// wall clock and ordinary blocking.
func RealRuntime() Runtime { return realRuntime{} }

type realRuntime struct{}

var _ Runtime = realRuntime{}

func (realRuntime) Now() time.Time { return time.Now() }

func (realRuntime) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		// Nothing to wait for: ctx's error, without a timer and the park
		// until it fires. (Yielding here with runtime.Gosched cost a fifth
		// of a faux turn's wall time: the goroutine went to the global
		// queue and woke the other processor.)
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Go runs fn on a goroutine of its own, one kept from an earlier function
// when there is one (internal/gopool): an invocation then starts on a grown
// stack.
func (realRuntime) Go(ctx context.Context, _ string, fn func(context.Context)) {
	gopool.Go(func() { fn(ctx) })
}

func (realRuntime) NewLock(string) Lock { return &realLock{ch: make(chan struct{}, 1)} }

func (realRuntime) NewEvent(string) Event { return &realEvent{ch: make(chan struct{})} }

type realEvent struct {
	once sync.Once
	ch   chan struct{}
}

func (e *realEvent) Set() { e.once.Do(func() { close(e.ch) }) }

func (e *realEvent) IsSet() bool {
	select {
	case <-e.ch:
		return true
	default:
		return false
	}
}

func (e *realEvent) Wait(ctx context.Context) error {
	if e.IsSet() {
		return nil
	}
	select {
	case <-e.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// realLock is a channel semaphore so that acquisition can observe ctx.
type realLock struct{ ch chan struct{} }

func (l *realLock) Lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *realLock) Unlock() {
	select {
	case <-l.ch:
	default:
		panic("core: unlock of a lock that is not held")
	}
}
