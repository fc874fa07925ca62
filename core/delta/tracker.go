package delta

import "github.com/pico-go/pico/internal/plant"

// Tracker holds a producer's value and computes the ops that carry its
// changes to replicas (§1.5).
//
// Mutations edit the value copy-on-write: a container is copied the first
// time a window writes it, and the value passed to NewTracker, the values
// passed to Set, Splice, Push and Replace, and every value State returned
// are never written afterwards. They are adopted, so the caller must not
// change them either.
//
// Flush publishes: the first flush, and the first after Replace, Reset or
// Rebase, returns one r of the whole value; every later one returns the ops that
// turn the previously published value into the current one, computed by
// Diff and guided by what the window wrote. So N AppendString calls to one
// string in a window are one a op with the joined text, a string whose
// front was dropped and whose end grew is one t then one a, a push is one p,
// and nothing changed is no op at all. Otherwise an r comes only when the
// whole root changes at once (a new type, a root string, a root array that
// keeps none of its elements) or a window needs more than FlushOpsMax ops.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	base  any // the value the next flush's ops start from
	state any // the current value
	// published is what a replica that applied every flush holds: written
	// only by Flush, Discard and Reset, never by the producer's mutations
	// (a Replace included), so Published may be read beside them.
	published any
	based     bool // replicas hold base; false until the first flush and after Replace, Reset or Rebase
	pending   bool // a mutation since the last flush (conservative: it may have changed nothing)
	ed        editor
}

// NewTracker tracks base, which the tracker adopts. It panics if base is not
// a value (see the package doc): building one is the caller's code, not
// input.
func NewTracker(base any) *Tracker {
	if r := checkValue(base); r != "" {
		panic("delta: NewTracker: base is not a value: " + r)
	}
	return &Tracker{base: base, state: base, published: base, ed: editor{keepHints: true}}
}

// State returns the current value. The tracker never writes it afterwards,
// so it stays valid, as a snapshot, for as long as the caller likes; the
// caller must not write it either.
func (t *Tracker) State() any {
	t.ed.owned = nil // what the caller can see is no longer the editor's to write
	return t.state
}

// Published returns the value as of the last flush (the base before the
// first, the value after a Discard or Reset): what a replica that applied
// every flush holds, never a change not flushed yet, a Replace included.
// Like State, it is a snapshot neither side writes. Unlike State it does not
// touch the tracker, and no mutation writes what it reads, so a reader that
// only synchronizes with flushes (not with the producer's mutations) may
// call it.
func (t *Tracker) Published() any { return t.published }

// Dirty reports whether the next Flush may return ops: it is an r, or
// something was mutated since the last flush (which may still turn out to
// have changed nothing).
func (t *Tracker) Dirty() bool { return !t.based || t.pending }

// Set sets an object key or an array element; on an array, index == length
// appends. The path must be non-empty: Replace replaces the root.
func (t *Tracker) Set(path Path, v any) error { return t.mutate(Set(path, v)) }

// Delete deletes an object key (a missing key is a no-op) or removes an
// array element.
func (t *Tracker) Delete(path Path) error { return t.mutate(Delete(path)) }

// AppendString appends s to the string at path.
func (t *Tracker) AppendString(path Path, s string) error { return t.mutate(Append(path, s)) }

// TruncateString drops the first n UTF-16 code units of the string at path.
func (t *Tracker) TruncateString(path Path, n int) error { return t.mutate(Truncate(path, n)) }

// Splice removes remove elements (clamped to the end) at index of the array
// at path and inserts items there. Path{} is a root array.
func (t *Tracker) Splice(path Path, index, remove int, items ...any) error {
	return t.mutate(Splice(path, index, remove, items))
}

// Push appends items to the array at path.
func (t *Tracker) Push(path Path, items ...any) error {
	if f := checkPath(path); f != nil {
		f.Op = string(VerbSplice)
		return f
	}
	target, f := lookup(t.state, path)
	if f != nil {
		f.Op = string(VerbSplice)
		return f
	}
	arr, ok := target.([]any)
	if !ok {
		return &OpError{Index: -1, Op: string(VerbSplice), Err: ErrType,
			Reason: path.String() + ": target is " + aKind(target) + "; push needs an array"}
	}
	return t.mutate(Splice(path, len(arr), 0, items))
}

// Reorder reorders the array at path so that new[i] = old[perm[i]].
func (t *Tracker) Reorder(path Path, perm []int) error { return t.mutate(Reorder(path, perm)) }

// Replace makes v the whole value; the next flush is an r. Until then
// Published is what it was.
func (t *Tracker) Replace(v any) error {
	if f := checkOp(Replace(v)); f != nil {
		return f
	}
	t.state = v
	t.based = false
	t.endWindow()
	return nil
}

// Reset is Replace for whoever synchronizes with the flushes rather than
// with the producer: v is published at once, as what a replica that starts
// now starts from, and the next flush is an r for those that hold an
// older value.
func (t *Tracker) Reset(v any) error {
	if err := t.Replace(v); err != nil {
		return err
	}
	t.published = v
	return nil
}

// Rebase makes the next flush an r without changing the value, for a
// replica that has to start over.
func (t *Tracker) Rebase() {
	t.based = false
	t.endWindow()
}

// Discard takes the changes since the last flush as published without
// publishing them: the next flush starts from the current value. Replicas
// that did not get those changes some other way are left behind.
func (t *Tracker) Discard() {
	t.endWindow()
	t.published = t.base
}

// Flush returns the ops since the previous flush (nil when there are none)
// and starts a new window. The ops share nothing with the tracker's value.
func (t *Tracker) Flush() []Op {
	var ops []Op
	switch {
	case !t.based:
		ops = []Op{Replace(cloneValue(t.state))}
		t.based = !plant.On("tracker-always-replaces")
	case t.pending:
		d := differ{hints: t.ed.hints}
		ops = d.run(t.base, t.state)
	}
	t.endWindow()
	t.published = t.base
	return ops
}

func (t *Tracker) mutate(op Op) error {
	next, f := t.ed.checkAndDo(t.state, op)
	if f != nil {
		return f.at(-1, op.Verb)
	}
	t.state = next
	t.pending = true
	return nil
}

// endWindow publishes the current value as the base: from here on every
// container of it is read-only and the window's hints are spent.
func (t *Tracker) endWindow() {
	t.base = t.state
	t.pending = false
	t.ed.nextWindow()
}

// lookup returns the value at path.
func lookup(root any, path Path) (any, *OpError) {
	v := root
	for depth, seg := range path {
		switch x := v.(type) {
		case map[string]any:
			key, ok := seg.(string)
			if !ok {
				return nil, fault(ErrPath, "%s: index on an object", path[:depth+1])
			}
			if v, ok = x[key]; !ok {
				return nil, fault(ErrPath, "%s: no such key", path[:depth+1])
			}
		case []any:
			i, ok := seg.(int)
			if !ok {
				return nil, fault(ErrPath, "%s: key on an array", path[:depth+1])
			}
			if i >= len(x) {
				return nil, fault(ErrRange, "%s: index past the end (length %d)", path[:depth+1], len(x))
			}
			v = x[i]
		default:
			return nil, fault(ErrPath, "%s: steps into %s", path[:depth+1], aKind(v))
		}
	}
	return v, nil
}
