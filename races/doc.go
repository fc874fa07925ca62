// Package races is the failure and concurrency matrix of the reference
// (§10.2) as one test, TestRaceMatrix: one subtest per row of the
// reference's table, named exactly as the table names the row, each run in
// both orders (subtests forward and reverse) under the simulated runtime
// with storage barriers and faults from package sim/fault. A cell forces its
// order through named scheduling points, so it holds at every seed; the
// test runs a fixed sweep of seeds and replays each one to check that the
// run is a pure function of its seed.
//
// To run one cell at one seed, with its whole trace:
//
//	go test ./races -run 'TestRaceMatrix/Persistence_paused_after_construction/reverse' -seed 7 -v
package races
