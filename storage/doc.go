// Package storage holds the records of a pico session and the Storage
// interface that persists them: objects and atomic batches, nothing about
// tasks, kinds or context. Backends live in the subpackages memory, jsonl and
// sqlite and must answer every query identically; the shared batch checks in
// this package are what keeps them honest about structure.
//
// Records returned by a backend are shared and immutable: callers must not
// modify them (their slices and raw JSON included). Values read through
// GetValue and ReadList are copies.
//
// # Files
//
//   - address.go: where state lives: scopes, Address and its string form, rewind policy, typed Value and List.
//   - check.go: CheckBatch, a batch's structural rules written once over the Lookup each backend implements.
//   - errors.go: the errors every backend returns (closed, historical read, bad query, bad address, rejected batch).
//   - kind.go: EntryKind, an entry kind's name that witnesses the type of its data and decodes it.
//   - pages.go: AllPages, the loop that reads a whole forward scan page by page.
//   - query.go: pages, cursors and the query of each scan; NewPage builds a page in either direction.
//   - records.go: the stored records: ids, conversations, entries and context edits, tasks and roles, versions.
//   - storage.go: the Storage interface: one atomic Commit at a time, and the reads every backend answers.
//   - write.go: the write types a batch may carry and CommitBatch, a main or a scratch batch.
//
// Tests: records_test.go (golden entry files in fixtures/entries, JSON forms,
// address validation), pages_test.go (AllPages).
package storage
