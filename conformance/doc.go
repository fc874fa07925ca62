// Package conformance holds the three-way conformance property of the
// storage backends (reference §10.1): random valid histories committed to
// the memory, JSONL and SQLite backends must read back identically through
// every query of storage.Storage, before and after a reopen. The package has
// no API; everything lives in its tests.
package conformance
