// Package storagetest is the conformance suite every storage backend runs.
// It checks a backend only through the storage.Storage interface: the same
// hand-built batches (reference pico-v3 §4, §7.2, §7.3) and the same
// randomized histories with forks, compared against a deliberately dumb model
// computed from the raw list of committed writes. Memory, JSONL and SQLite
// pass the same suite, so they answer every query identically.
//
// A backend's test calls Run with a function that opens a fresh, empty store:
//
//	func TestStorage(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Storage { return memory.New() })
//	}
//
// # Files
//
//   - commit.go: commit numbering, empty and rejected batches, the read position of pages, closed stores.
//   - fork.go: forks (§2.4, §4.4): shared history capped at the fork point, nested forks, deleted sources.
//   - model.go: the deliberately dumb model: the raw list of committed writes, every answer by brute force.
//   - property.go: the property that random valid histories with forks read the same as the model.
//   - query.go: the rows of the reference's query table (§7.2), one per caller, and the rules every scan shares.
//   - read.go: reads that fail the test on error, and the snapshot compared around a rejected batch.
//   - reject.go: one case per rule of storage.CheckBatch, each rejected at the right write with the store unchanged.
//   - scratch.go: a task's scratch scope (§4.6), retired when the task settles.
//   - state.go: values and lists (§4.2): rewindable reads across clears, removes and deletes; sticky state.
//   - storagetest.go: Run and its groups of named specifications, and the store under test.
//   - tx.go: the batch builder that numbers writes from LastSeq as the harness's Tx does.
package storagetest
