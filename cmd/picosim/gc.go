package main

import (
	"os"
	"runtime/debug"
)

// simGCPercent is the garbage collector's target (GOGC) picosim runs its
// simulations with. A simulated run keeps about a megabyte live, so at Go's
// default of 100 the heap's floor of 4 MB set the pace: a collection every
// few milliseconds, and their mark phases, each holding a P, took about as
// much time as the runs did (basic-turn fuzzed on two workers: 2.9 s at
// 100, 1.6 s at 400, for 12 MB more resident memory; 800 gained nothing).
const simGCPercent = 400

// setGCPercent sets the collector's target to percent unless the
// environment sets GOGC, which always wins, and returns what puts the
// previous target back.
func setGCPercent(percent int) (restore func()) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return func() {}
	}
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}

// goDefaultGCPercent is Go's own GOGC, what a program embedding pico runs
// with unless it says otherwise: bench measures the harness at it.
const goDefaultGCPercent = 100
