// Package sqlite is the SQLite backend: one database file holds any number of
// sessions, every table keyed by the session id first. Commits are single
// transactions validated by storage.CheckBatch against SQL lookups inside the
// transaction; reads follow the memory backend's semantics exactly.
//
// # Files
//
//   - read.go: the reads in SQL: fork chains, paged scans over segments, values and lists now or as of an entry.
//   - sqlite.go: the Store: schema and version, Open, the one-transaction Commit and the in-transaction Lookup.
//
// Tests: sqlite_test.go (the storagetest suite, also reopened after every
// commit; schema version mismatch; sessions sharing a file), fuzz_test.go
// (hand-corrupted rows fail with a *RowError naming table and row),
// bench_test.go (commit, newest head and settle over a long history).
package sqlite
