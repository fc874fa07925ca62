// Package gopool runs functions on goroutines that are kept for the next
// function once theirs returns, a bounded number of them. A function then
// starts on a stack already grown by an earlier one instead of growing a
// new one by copying, which was 8% of the CPU of the harness's
// invocations (and of the simulator's actors, when they ran on it).
//
// A function run by Go may block, panic or call runtime.Goexit as on a
// goroutine of its own: Go never waits for a busy goroutine, a panic ends
// the process as it would, and a goroutine that exits is simply not kept.
package gopool

import "sync"

// IdleMax bounds the goroutines that wait for a function.
const IdleMax = 32

var pool struct {
	mu      sync.Mutex
	idle    []chan func()
	started int
}

// Go runs fn on a goroutine: one that waits for work if there is one, else
// a new one.
func Go(fn func()) {
	pool.mu.Lock()
	if n := len(pool.idle); n > 0 {
		w := pool.idle[n-1]
		pool.idle = pool.idle[:n-1]
		pool.mu.Unlock()
		w <- fn
		return
	}
	pool.started++
	pool.mu.Unlock()
	go work(fn)
}

// work runs fn, then waits for the next function unless enough goroutines
// wait already.
func work(fn func()) {
	var next chan func()
	for {
		fn()
		pool.mu.Lock()
		if len(pool.idle) >= IdleMax {
			pool.mu.Unlock()
			return
		}
		if next == nil {
			next = make(chan func())
		}
		pool.idle = append(pool.idle, next)
		pool.mu.Unlock()
		fn = <-next
	}
}

// counts reports the goroutines waiting for work and those Go started.
func counts() (idle, started int) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return len(pool.idle), pool.started
}
