package jsonl

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/storage"
)

// A patch or settle carries its task's whole new state (storage.Write), and
// most of it is what the task's state already held: a settled tool repeats
// its call and arguments to add its output. From format 2 on, a main-file
// line may write such a state as what changed since the task's state
// before the line:
//
//	"stateMerge": {the members that are new or changed}
//	"stateDrop":  ["the names of the members gone"]   (absent when none)
//
// The state is then the previous state's members, less the dropped ones,
// with the merge's over them, in the order of their names (the order
// encoding/json writes a map in). The writer uses the form only when that
// rebuilds the new state byte for byte and is shorter; the reader rebuilds
// the state before the batch is checked or applied, so nothing past the
// file ever sees the difference.

// member is one top-level member of a JSON object: its key, between the
// quotes, and its value, both in place in the object's text.
type member struct{ key, value []byte }

// objectMembers splits a compact JSON object into its top-level members,
// in order, appended to into. It reports false for anything else: not an
// object, space outside strings, a key with an escape or a byte outside
// ASCII.
func objectMembers(raw []byte, into []member) ([]member, bool) {
	d := jsonvalue.NewDecoder(raw)
	end := 0
	ok := d.Object(func(key []byte) bool {
		v, ok := d.Value()
		into = append(into, member{key, v})
		return ok
	}) && d.End()
	if !ok || len(raw) == 0 || raw[len(raw)-1] != '}' {
		return into, false
	}
	// Compact: the members, their quotes, colons and commas, and the braces
	// account for every byte.
	for _, m := range into {
		end += len(m.key) + len(m.value) + 4 // "key": and a comma or a brace
	}
	if len(into) == 0 {
		end = 1
	}
	return into, end+1 == len(raw)
}

func compareKeys(a, b member) int { return bytes.Compare(a.key, b.key) }

// sortedUnique reports whether the members' keys strictly increase.
func sortedUnique(ms []member) bool {
	for i := 1; i < len(ms); i++ {
		if bytes.Compare(ms[i-1].key, ms[i].key) >= 0 {
			return false
		}
	}
	return true
}

// stateDiff writes next, a task's new state, as a merge over prev, its
// state before: it appends to buf the write's merge member and, when a
// member is gone, its drop member (`,"stateMerge":{...}` and
// `,"stateDrop":[...]`), and reports true. It reports false, when the
// difference would not rebuild next byte for byte or is no shorter than
// next written whole, leaving buf's bytes past its length undefined. It
// takes only states a line writes as they are (jsonvalue.Verbatim): what
// the reader finds as prev is then these very bytes, and next's length is
// its length written whole.
func stateDiff(buf, prev, next []byte, scratch *[2][]member) ([]byte, bool) {
	if !jsonvalue.VerbatimIfValid(prev) || !jsonvalue.VerbatimIfValid(next) {
		return buf, false // objectMembers checks that they are valid
	}
	out, ok := appendMerge(buf, prev, next, scratch)
	if !ok || len(out)-len(buf) >= len(`,"state":`)+len(next) {
		return buf, false
	}
	return out, true
}

// appendMerge is stateDiff whatever the merge's length.
func appendMerge(buf, prev, next []byte, scratch *[2][]member) ([]byte, bool) {
	pm, ok := objectMembers(prev, scratch[0][:0])
	scratch[0] = pm
	if !ok {
		return buf, false
	}
	if !sortedUnique(pm) { // a state written from a struct: its fields' order
		slices.SortFunc(pm, compareKeys)
		if !sortedUnique(pm) {
			return buf, false
		}
	}
	nm, ok := objectMembers(next, scratch[1][:0])
	scratch[1] = nm
	if !ok || !sortedUnique(nm) {
		return buf, false
	}
	out := append(buf, `,"stateMerge":{`...)
	i, set := 0, 0
	for _, m := range nm {
		for i < len(pm) && bytes.Compare(pm[i].key, m.key) < 0 {
			i++
		}
		if i < len(pm) && bytes.Equal(pm[i].key, m.key) && bytes.Equal(pm[i].value, m.value) {
			continue
		}
		if set++; set > 1 {
			out = append(out, ',')
		}
		out = appendMember(out, m)
	}
	out = append(out, '}')
	dropped, j := 0, 0
	for _, m := range pm {
		for j < len(nm) && bytes.Compare(nm[j].key, m.key) < 0 {
			j++
		}
		if j < len(nm) && bytes.Equal(nm[j].key, m.key) {
			continue
		}
		if dropped++; dropped == 1 {
			out = append(out, `,"stateDrop":[`...)
		} else {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.key...)
		out = append(out, '"')
	}
	if dropped > 0 {
		out = append(out, ']')
	}
	return out, true
}

func appendMember(out []byte, m member) []byte {
	out = append(out, '"')
	out = append(out, m.key...)
	out = append(out, `":`...)
	return append(out, m.value...)
}

// MergeError is a stateMerge a line cannot apply: on a task the session
// does not hold, or one the batch wrote before, a merge or a drop that is
// not what a writer writes, a merge beside a whole state.
type MergeError struct {
	Task   storage.ID
	Reason string
}

func (e *MergeError) Error() string {
	return fmt.Sprintf("the state merge of task %d: %s", e.Task, e.Reason)
}

// mergedState rebuilds a state written as a merge: prev's members less
// drop, with merge's over them, in the order of their names. It is the
// inverse of stateDiff, and refuses what stateDiff never writes.
// Its members are split into scratch's, kept from one call to the next.
func mergedState(task storage.ID, prev, merge []byte, drop []string, scratch *[2][]member) ([]byte, error) {
	pm, ok := objectMembers(prev, scratch[0][:0])
	scratch[0] = pm
	if !ok {
		return nil, &MergeError{Task: task, Reason: "the task's state before it is not a plain JSON object"}
	}
	slices.SortFunc(pm, compareKeys)
	mm, ok := objectMembers(merge, scratch[1][:0])
	scratch[1] = mm
	if !ok || !sortedUnique(mm) || !sortedUnique(pm) {
		return nil, &MergeError{Task: task, Reason: "the merge is not a compact object with plain keys in order"}
	}
	for i, k := range drop {
		at, found := slices.BinarySearchFunc(pm, k, func(m member, k string) int { return bytes.Compare(m.key, []byte(k)) })
		if !found || (i > 0 && drop[i-1] >= k) {
			return nil, &MergeError{Task: task, Reason: fmt.Sprintf("it drops %q, which the state does not hold or the list names out of order", k)}
		}
		if _, inMerge := slices.BinarySearchFunc(mm, k, func(m member, k string) int { return bytes.Compare(m.key, []byte(k)) }); inMerge {
			return nil, &MergeError{Task: task, Reason: fmt.Sprintf("it both sets and drops %q", k)}
		}
		pm = slices.Delete(pm, at, at+1)
	}
	out := make([]byte, 0, len(prev)+len(merge))
	out = append(out, '{')
	i, j := 0, 0
	for i < len(pm) || j < len(mm) {
		var m member
		switch {
		case j == len(mm) || (i < len(pm) && bytes.Compare(pm[i].key, mm[j].key) < 0):
			m, i = pm[i], i+1
		case i < len(pm) && bytes.Equal(pm[i].key, mm[j].key):
			m, i, j = mm[j], i+1, j+1
		default:
			m, j = mm[j], j+1
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendMember(out, m)
	}
	return append(out, '}'), nil
}
