// Package conformance holds the three-way conformance property of the
// storage backends (reference §10.1): random valid histories committed to
// the memory, JSONL and SQLite backends must read back identically through
// every query of storage.Storage, before and after a reopen. The package has
// no API; everything lives in its tests.
//
// Beside it, the kit that checks another implementation (a port) against
// this one (DESIGN §6, fixtures/README.md):
//
//   - script: the host-action program language, shared with picosim;
//   - kit: data scenarios (fixtures/scenarios), their normalized observable
//     outcomes, the JSON-lines port protocol, its runner and this
//     implementation as a port (Serve);
//   - schema: the JSON Schemas of everything a port exchanges
//     (fixtures/schema/v1), generated from the Go types, and their validator;
//   - ports/gopico: the Go adapter, a small main over kit.Serve;
//   - ports/pico3: the TypeScript pico3's adapter and its differences.
//
// # Files
//
// Every file but this one is a test file:
//
//   - backends_bench_test.go: the durable backends under the agent-loop workload: commit latency, bytes, SQLite's heap.
//   - conformance_test.go: the three backends in lockstep: random batch streams, every query compared, deep forks.
//   - crashpoints_test.go: crash points of the agent loop (§7.4, §10.2): a crash after or inside every batch, then recovery.
//   - inbox_disk_test.go: what JSONL and SQLite keep on disk of an accepted input and its placement.
package conformance
