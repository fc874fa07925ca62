// Package simtest holds what the harness's tests share to run a session
// under the simulator: one seeded run, a sweep of seeds, a panicking must
// for actors, and the small task helpers the kernel's and the agent's tests
// both use. Tests import it, and picosim for its view comparison
// (ViewDiff), which its oracles share with the tests.
//
// # Files
//
//   - simtest.go: seeded runs and sweeps, Must, creating and reading tasks, StepKind, drives in an actor, reopens, crashed closes.
//   - watch.go: conversation watches that record what they deliver, catching up with a commit, and view comparison.
package simtest
