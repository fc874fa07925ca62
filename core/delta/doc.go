// Package delta holds the preview delta ops: the JSON tuples a durable agent
// harness streams so that watchers can keep a replica of a task's preview (a
// JSON value) current. It follows shared/reference/delta-and-messages.md §1.
//
// # Values and paths (§1.1)
//
// A value is plain JSON, represented as nil, bool, string (valid UTF-8),
// json.Number, []any and map[string]any, nothing else: numbers are always
// json.Number so that a value and its JSON bytes round-trip exactly, and a
// nil []any or nil map[string]any is rejected because encoding/json writes it
// as null. ParseValue decodes JSON into this form.
//
// A Path is a list of segments: a string is an object key, an int ≥ 0 an array
// index. Path{} is the root. The segments "__proto__", "constructor" and
// "prototype" are rejected in paths (they stay legal as keys inside values),
// and a path has at most PathSegmentsMax segments.
//
// # Ops (§1.2)
//
// Each Op has exactly one JSON form, the reference tuple:
//
//	["r", value]                    replace the root (no path)
//	["s", path, value]              set an object key or array element; index == length appends
//	["d", path]                     delete an object key (or splice out an array element)
//	["a", path, text]               append to an existing string
//	["t", path, n]                  drop the first n UTF-16 code units of a string
//	["p", path, index, remove, items]  JS-style splice; remove is clamped; path may be []
//	["m", path, perm]               reorder an array so that new[i] = old[perm[i]]; path may be []
//
// String lengths and offsets are UTF-16 code units, as in JavaScript: a rune
// outside the Basic Multilingual Plane counts 2.
//
// # Applying (§1.3)
//
// Apply mutates and adopts; ApplyImmutable never mutates its input and shares
// what it does not change. Unlike the reference, both are all-or-nothing: a
// batch that fails at op i returns an *OpError naming i and leaves the value
// exactly as it was.
//
// # Computing ops (§1.5)
//
// A Tracker holds the producer's value. Its mutations (Set, Delete,
// AppendString, TruncateString, Splice, Push, Reorder, Replace) edit the value
// copy-on-write and Flush turns everything since the previous flush into ops:
// the first flush, and the one after Replace or Rebase, is one r; later ones
// diff the published value against the current one, so N appends to a string
// in one window are one a op and a sliding tail is t then a. Diff computes ops
// between two arbitrary values by the same rules.
//
// # Wire encoding (§1.4)
//
// Encoder and Decoder are the optional path-interning codec: a path equal to
// the previous op's is omitted, a path used a second time is defined as a
// numeric id, and r resets both dictionaries.
//
// # Files
//
//   - apply.go: Apply and ApplyImmutable: the editor that applies a batch in place or copy-on-write, all or nothing.
//   - diff.go: Diff and the rules of §1.5: the string rule, objects key by key, arrays aligned into splices or one m.
//   - errors.go: OpError and the four classes of rejected op (malformed, path, range, type).
//   - op.go: Op, the seven verbs and their constructors, the checks of an op on its own, and the tuple JSON form.
//   - path.go: Path, its segments and bound, and the keys no path may carry.
//   - tracker.go: Tracker, the producer's value: copy-on-write mutations, and Flush, which turns a window into ops.
//   - value.go: what a value is: ParseValue and ValueOf, value checks, equality, identity and UTF-16 lengths.
//   - wire.go: Encoder and Decoder, the path-interning wire codec (§1.4).
//
// Tests: examples_test.go (the tables of §1.6), property_test.go (flushes,
// diffs and the wire codec replay; Apply is all or nothing),
// strings_internal_test.go (UTF-16 arithmetic and the overlap search).
package delta
