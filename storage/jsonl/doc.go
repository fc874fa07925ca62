// Package jsonl is the JSON Lines backend (§7.4): the memory backend plus
// one line per committed batch. Main batches go to the session's main file;
// each live task's scratch batches go to a file of their own in the
// session's scratch directory, so every commit writes exactly one file.
// Bytes are written before the batch is published to memory. Open replays
// the main file, then the scratch of the tasks still live; an unterminated
// final line is a torn write, discarded and cut off before the next append;
// a malformed complete line fails open with the file and line named.
//
// # Files
//
//   - jsonl.go: the Store: open and replay, one line per commit to the main or a scratch file, fsync,
//     and retiring a settled task's scratch file: kept emptied as a spare for the next task, or unlinked.
//   - merge.go: format 2's state merges: a patch or settle written as what changed in its task's
//     state since the line before, rebuilt byte for byte on replay.
//
// Tests: jsonl_test.go (the storagetest suite, also reopened after every
// commit; replay order, torn and malformed lines, retired scratch, private
// files), spare_internal_test.go (spares taken, bounded, removed, and left
// alone when written behind the store's back), fuzz_test.go (replay of
// arbitrary files), bench_test.go (commit cost with and without fsync),
// merge_test.go and merge_internal_test.go (merges written, rebuilt and
// refused when malformed; format-1 sessions written on in format 1; the
// batch limit on the batch written whole).
package jsonl
