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
//
// # Files
//
// Every file but this one is a test file:
//
//   - abort_test.go: an abort mark against a running execute (§6.3): revoked authority, the fresh abort after return.
//   - agent_test.go: the agent loop (§5.5, §8.1): acceptance, shutdown, parallel tools, cancels, shared generations.
//   - authority_test.go: the progress guard (§6.1): status cycles, and a host that patches an owned task.
//   - close_test.go: ending a session while invocations run (§6.4): Close against a commit, a broken abort handler.
//   - drive_test.go: drive callers (§6.2): repeated and overlapping drives, self-drives, a caller that cancels.
//   - files_test.go: what storage keeps on disk: mixed batches, torn and malformed lines, scratch retirement and crashes.
//   - harness_test.go: running a cell: forced order, the seed sweep or -seed, replay by trace digest, failure reports.
//   - history_test.go: a large finished history opens reading only the live tasks and the ancestry they need.
//   - matrix_test.go: TestRaceMatrix and the §10.2 table: each row's name, required observation and cell.
//   - persistence_test.go: a commit held between construction and persistence while readers see the old state.
//   - session_test.go: what the driver rows share: a session over a store, kinds built from functions, the journal.
//   - watch_test.go: a watch that registers while another caller commits (§9.4).
package races
