package core

import (
	"context"
	"sync"
	"time"
)

// RealRuntime returns the runtime of an ordinary process: goroutines, the
// wall clock and ordinary blocking.
func RealRuntime() Runtime { return realRuntime{} }

type realRuntime struct{}

var _ Runtime = realRuntime{}

func (realRuntime) Now() time.Time { return time.Now() }

func (realRuntime) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Go runs fn on a goroutine of its own. Goroutines that finished their
// function wait, a bounded number of them, for the next one: an invocation
// then starts on a stack already grown to an invocation's depth instead of
// growing a new one by copying (newstack was 8% of a turn's CPU).
func (realRuntime) Go(ctx context.Context, _ string, fn func(context.Context)) {
	job := func() { fn(ctx) }
	workers.mu.Lock()
	if n := len(workers.idle); n > 0 {
		w := workers.idle[n-1]
		workers.idle = workers.idle[:n-1]
		workers.mu.Unlock()
		w <- job
		return
	}
	workers.started++
	workers.mu.Unlock()
	go work(job)
}

// workersIdleMax bounds the goroutines that wait for work.
const workersIdleMax = 32

// workers holds the goroutines of Go that wait for their next function,
// each behind its own channel, and counts the goroutines Go started.
var workers struct {
	mu      sync.Mutex
	idle    []chan func()
	started int
}

// work runs job, then waits for the next one unless enough goroutines wait
// already.
func work(job func()) {
	var next chan func()
	for {
		job()
		workers.mu.Lock()
		if len(workers.idle) >= workersIdleMax {
			workers.mu.Unlock()
			return
		}
		if next == nil {
			next = make(chan func())
		}
		workers.idle = append(workers.idle, next)
		workers.mu.Unlock()
		job = <-next
	}
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
