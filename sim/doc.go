// Package sim runs harness code deterministically: every actor is a
// goroutine, a coroutine of the scheduler's, so exactly one runs at a time.
// At each blocking point (taking a lock, waiting for an event or a context,
// sleeping) the actor hands control back and the scheduler, on Run's
// goroutine, picks the next runnable actor with its strategy,
// which draws only from a seeded generator. Virtual time (package clock)
// advances only when nothing is runnable and a timer is pending; nothing
// runnable and nothing pending is a deadlock, reported with every actor's name
// and what it waits for. So a seed fixes the interleaving, the ids and the
// bytes of a run, and any failure replays.
//
// # Files
//
//   - runtime.go: the simulated core.Runtime: sleeps, locks, events and spawned actors as scheduling points, and Yield.
//   - sim.go: the Sim and its scheduler: actors parked at named points, the scheduler's loop, the unwinding of what is left, deadlock, panic and step-limit errors.
//   - strategy.go: who runs next: Random, PCT and Forced orders of named points, and ParseStrategy.
//   - trace.go: the Trace, one JSON line per decision and recorded event with a running digest, and Sim.Record.
//
// Tests: sim_test.go (same seed, same trace; a planted lost update is found
// and replays; forced orders; deadlock reports; every actor unwound), strategy_test.go (strategy
// names), bench_test.go (the cost of a decision and an actor switch).
package sim
