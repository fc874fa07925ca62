// Package memory is the in-memory backend: current maps, ordered entries per
// conversation, version histories and lookup indexes that all reference the
// same immutable records. It is also the model the durable backends are held
// to, and the base the JSONL backend replays into.
//
// # Files
//
//   - memory.go: the Store and its indexes, and the write path: Commit, Validate, Publish and replay's Apply.
//   - read.go: the reads: fork chains capped at each fork point, paged scans, values and lists now or as of an entry.
//
// Tests: memory_test.go (the storagetest suite; read work grows with fork
// depth, not history), fuzz_test.go (a rejected batch leaves the store as it
// was).
package memory
