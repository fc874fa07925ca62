package core

import (
	"context"
	"runtime"
	"sync"
	"testing"
)

type ctxKey struct{}

// runConcurrently runs n functions with Go and returns once every one of
// them has run: they all wait for each other first, so none of them can
// be waiting for another to finish.
func runConcurrently(t *testing.T, n int) {
	t.Helper()
	var arrived, done sync.WaitGroup
	arrived.Add(n)
	done.Add(n)
	got := make([]int, n)
	for i := range n {
		ctx := context.WithValue(context.Background(), ctxKey{}, i)
		RealRuntime().Go(ctx, "job", func(ctx context.Context) {
			defer done.Done()
			arrived.Done()
			arrived.Wait()
			got[ctx.Value(ctxKey{}).(int)]++
		})
	}
	done.Wait()
	for i, c := range got {
		if c != 1 {
			t.Fatalf("function %d ran %d times, want once", i, c)
		}
	}
}

// settleWorkers returns once the finished goroutines of Go have either
// become idle or exited: as many idle as the bound allows.
func settleWorkers(want int) {
	for {
		workers.mu.Lock()
		n := len(workers.idle)
		workers.mu.Unlock()
		if n >= want {
			return
		}
		runtime.Gosched()
	}
}

func startedWorkers() int {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	return workers.started
}

// The real runtime's Go reuses finished goroutines, a bounded number of
// them, and never makes a function wait for a busy one.
func TestRealGoReusesABoundedNumberOfGoroutines(t *testing.T) {
	runConcurrently(t, 3*workersIdleMax)
	settleWorkers(workersIdleMax)
	workers.mu.Lock()
	idle := len(workers.idle)
	workers.mu.Unlock()
	if idle != workersIdleMax {
		t.Fatalf("%d goroutines wait for work, want the bound %d", idle, workersIdleMax)
	}

	before := startedWorkers()
	runConcurrently(t, workersIdleMax)
	if got := startedWorkers() - before; got != 0 {
		t.Fatalf("%d functions on %d idle goroutines started %d new ones, want none", workersIdleMax, workersIdleMax, got)
	}
	settleWorkers(workersIdleMax)
	before = startedWorkers()
	runConcurrently(t, workersIdleMax+1)
	if got := startedWorkers() - before; got != 1 {
		t.Fatalf("%d functions on %d idle goroutines started %d new ones, want 1", workersIdleMax+1, workersIdleMax, got)
	}
}
