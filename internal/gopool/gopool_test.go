package gopool

import (
	"runtime"
	"sync"
	"testing"
)

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
		Go(func() {
			defer done.Done()
			arrived.Done()
			arrived.Wait()
			got[i]++
		})
	}
	done.Wait()
	for i, c := range got {
		if c != 1 {
			t.Fatalf("function %d ran %d times, want once", i, c)
		}
	}
}

// settle returns once at least want goroutines wait for work.
func settle(want int) {
	for {
		if idle, _ := counts(); idle >= want {
			return
		}
		runtime.Gosched()
	}
}

// Go reuses finished goroutines, a bounded number of them, and never makes
// a function wait for a busy one.
func TestGoReusesABoundedNumberOfGoroutines(t *testing.T) {
	runConcurrently(t, 3*IdleMax)
	settle(IdleMax)
	if idle, _ := counts(); idle != IdleMax {
		t.Fatalf("%d goroutines wait for work, want the bound %d", idle, IdleMax)
	}
	_, before := counts()
	runConcurrently(t, IdleMax)
	if _, after := counts(); after != before {
		t.Fatalf("%d functions on %d idle goroutines started %d new ones, want none", IdleMax, IdleMax, after-before)
	}
	settle(IdleMax)
	_, before = counts()
	runConcurrently(t, IdleMax+1)
	if _, after := counts(); after-before != 1 {
		t.Fatalf("%d functions on %d idle goroutines started %d new ones, want 1", IdleMax+1, IdleMax, after-before)
	}
}

// A function that ends its goroutine with runtime.Goexit takes it out of
// the pool; the next function still runs.
func TestAGoroutineThatExitsIsNotKept(t *testing.T) {
	exited := make(chan struct{})
	Go(func() {
		defer close(exited)
		runtime.Goexit()
	})
	<-exited
	ran := make(chan struct{})
	Go(func() { close(ran) })
	<-ran
}
