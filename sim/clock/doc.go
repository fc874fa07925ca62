// Package clock is the simulation's faux clock: virtual time that starts at a
// fixed instant and moves only when the scheduler advances it to the next
// pending timer. It never reads the wall clock.
//
// # Files
//
//   - clock.go: the Clock, its Epoch and timers, and Advance, which jumps to the earliest deadline and fires what is due.
//
// Tests: clock_test.go (firing order; zero and negative delays).
package clock
