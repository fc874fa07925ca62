package delta_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core/delta"
)

// Keys include a reserved one: legal inside values, never in a path.
var keyAlphabet = []string{"a", "b", "text", "items", "constructor"}

// Tokens include runes outside the BMP (two UTF-16 units) and an empty one.
var tokenAlphabet = []string{"x", "yz", "é", "😀", " ", "line\n", "", "ab"}

func pick[T any](t *rapid.T, label string, xs []T) T {
	return xs[rapid.IntRange(0, len(xs)-1).Draw(t, label)]
}

func genString(t *rapid.T, label string) string {
	s := ""
	for range rapid.IntRange(0, 3).Draw(t, label+"Len") {
		s += pick(t, label, tokenAlphabet)
	}
	return s
}

// genValue draws a value at most depth containers deep.
func genValue(t *rapid.T, depth int) any {
	kinds := 4
	if depth > 0 {
		kinds = 7
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return json.Number(pick(t, "number", []string{"0", "1", "-2", "1.5", "1e3", "42"}))
	case 3:
		return genString(t, "string")
	case 4:
		arr := []any{}
		for range rapid.IntRange(0, 4).Draw(t, "arrayLen") {
			arr = append(arr, genValue(t, depth-1))
		}
		return arr
	default:
		obj := map[string]any{}
		for range rapid.IntRange(0, 4).Draw(t, "objectLen") {
			obj[pick(t, "key", keyAlphabet)] = genValue(t, depth-1)
		}
		return obj
	}
}

// located is a place in a value.
type located struct {
	path  delta.Path
	value any
}

// places lists every place a path may address (none below a reserved key).
func places(v any) []located {
	var out []located
	var walk func(p delta.Path, v any)
	walk = func(p delta.Path, v any) {
		out = append(out, located{append(delta.Path{}, p...), v})
		switch x := v.(type) {
		case map[string]any:
			for _, k := range keyAlphabet { // a fixed order keeps draws reproducible
				if c, ok := x[k]; ok && k != "constructor" {
					walk(append(p, k), c)
				}
			}
		case []any:
			for i, c := range x {
				walk(append(p, i), c)
			}
		}
	}
	walk(delta.Path{}, v)
	return out
}

func placesOf(v any, keep func(any) bool) []located {
	var out []located
	for _, l := range places(v) {
		if keep(l.value) {
			out = append(out, l)
		}
	}
	return out
}

func isString(v any) bool { _, ok := v.(string); return ok }
func isArray(v any) bool  { _, ok := v.([]any); return ok }
func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// utf16Boundaries are the UTF-16 offsets in s that do not split a rune.
func utf16Boundaries(s string) []int {
	out := []int{0}
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
		out = append(out, n)
	}
	return out
}

// genOp draws an op against v: mostly one that applies, sometimes one whose
// path, index or count misses. Every op it draws is well formed.
func genOp(t *rapid.T, v any) delta.Op {
	all := places(v)
	anyPlace := pick(t, "place", all)
	strs := placesOf(v, func(x any) bool { return isString(x) })
	if len(strs) > 0 && len(strs[0].path) == 0 {
		strs = nil // a root string is replaced, never edited
	}
	arrs := placesOf(v, isArray)
	conts := placesOf(v, isContainer)
	miss := rapid.IntRange(0, 9).Draw(t, "miss") == 0
	switch rapid.IntRange(0, 8).Draw(t, "verb") {
	case 0, 1: // a
		if len(strs) > 0 && !miss {
			return delta.Append(pick(t, "string", strs).path, pick(t, "token", tokenAlphabet))
		}
		return delta.Append(child(anyPlace.path, "a"), "x")
	case 2: // t
		if len(strs) == 0 {
			return delta.Truncate(child(anyPlace.path, 0), 1)
		}
		l := pick(t, "string", strs)
		n := pick(t, "count", utf16Boundaries(l.value.(string)))
		if miss {
			n = rapid.IntRange(0, 12).Draw(t, "anyCount")
		}
		return delta.Truncate(l.path, n)
	case 3: // s of a string that slid: t + a territory
		if len(strs) == 0 {
			break
		}
		l := pick(t, "string", strs)
		s := l.value.(string)
		cut := 0
		for _, r := range []rune(s)[:rapid.IntRange(0, len([]rune(s))).Draw(t, "drop")] {
			cut += len(string(r))
		}
		return delta.Set(l.path, s[cut:]+pick(t, "token", tokenAlphabet))
	case 4: // s
		if len(conts) == 0 || miss {
			return delta.Set(child(anyPlace.path, pick(t, "key", keyAlphabet[:4])), genValue(t, 2))
		}
		l := pick(t, "container", conts)
		if arr, ok := l.value.([]any); ok {
			return delta.Set(child(l.path, rapid.IntRange(0, len(arr)).Draw(t, "index")), genValue(t, 2))
		}
		return delta.Set(child(l.path, pick(t, "key", keyAlphabet[:4])), genValue(t, 2))
	case 5: // d
		if len(all) > 1 && !miss {
			return delta.Delete(pick(t, "place", all[1:]).path)
		}
		return delta.Delete(child(anyPlace.path, "b"))
	case 6, 7: // p
		if len(arrs) == 0 || miss {
			return delta.Splice(anyPlace.path, 0, 1, nil)
		}
		l := pick(t, "array", arrs)
		n := len(l.value.([]any))
		index := rapid.IntRange(0, n).Draw(t, "index")
		remove := rapid.IntRange(0, n-index+1).Draw(t, "remove")
		var items []any
		for range rapid.IntRange(0, 3).Draw(t, "items") {
			items = append(items, genValue(t, 1))
		}
		return delta.Splice(l.path, index, remove, items)
	case 8: // m
		if len(arrs) == 0 {
			break
		}
		l := pick(t, "array", arrs)
		idx := make([]int, len(l.value.([]any)))
		for i := range idx {
			idx[i] = i
		}
		perm := rapid.Permutation(idx).Draw(t, "perm")
		if miss {
			perm = append(perm, len(perm))
		}
		return delta.Reorder(l.path, perm)
	}
	return delta.Append(child(anyPlace.path, "text"), "!")
}

// child is p with seg appended, in a new slice.
func child(p delta.Path, seg any) delta.Path {
	return append(append(delta.Path{}, p...), seg)
}

// callTracker performs op through the Tracker method that matches it.
func callTracker(tr *delta.Tracker, op delta.Op) error {
	switch op.Verb {
	case delta.VerbSet:
		return tr.Set(op.Path, op.Value)
	case delta.VerbDelete:
		return tr.Delete(op.Path)
	case delta.VerbAppend:
		return tr.AppendString(op.Path, op.Text)
	case delta.VerbTruncate:
		return tr.TruncateString(op.Path, op.Count)
	case delta.VerbSplice:
		return tr.Splice(op.Path, op.Index, op.Remove, op.Items...)
	case delta.VerbReorder:
		return tr.Reorder(op.Path, op.Perm)
	}
	panic("callTracker: " + op.Verb)
}

// copyOps copies a batch through its JSON, so that nothing is shared.
func copyOps(t tb, ops []delta.Op) []delta.Op {
	t.Helper()
	return opsOf(t, jsonOf(t, batchJSON(ops)))
}

// sameClass reports whether two errors are both nil or of one class.
func sameClass(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	for _, c := range []error{delta.ErrMalformed, delta.ErrPath, delta.ErrRange, delta.ErrType} {
		if errors.Is(a, c) != errors.Is(b, c) {
			return false
		}
	}
	return true
}

// objectRootChangedInside reports whether before and after are objects
// whose reserved keys (which no path can address) are equal.
func objectRootChangedInside(before, after any) bool {
	b, ok1 := before.(map[string]any)
	a, ok2 := after.(map[string]any)
	if !ok1 || !ok2 {
		return false
	}
	for _, k := range []string{"__proto__", "constructor", "prototype"} {
		bv, inB := b[k]
		av, inA := a[k]
		if inB != inA || !cmp.Equal(bv, av) {
			return false
		}
	}
	return true
}

type kept struct {
	what       string
	value, was any
}

// TestTrackerFlushReplays drives a Tracker with random mutation sequences
// and flushes. At every flush ApplyImmutable(previous state, ops) equals the
// tracker's State and leaves the previous state alone, the ops survive JSON
// and the wire codec unchanged, and the state equals a dumb model: the same
// ops applied one by one with Apply. No r appears except where one is due,
// and nothing the tracker adopted or handed out is ever written.
func TestTrackerFlushReplays(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		base := genValue(rt, 3)
		tr := delta.NewTracker(base)
		model := deepCopy(rt, base)
		adopted := []kept{{"base", base, deepCopy(rt, base)}}
		var replica any
		enc, dec := delta.NewEncoder(), delta.NewDecoder()
		wantBase, mutated := true, false

		flush := func() {
			ops := tr.Flush()
			state := tr.State()
			if diff := cmp.Diff(model, state); diff != "" {
				rt.Fatalf("state differs from the model (-model +state):\n%s", diff)
			}
			for i, op := range ops {
				if op.Verb != delta.VerbReplace || wantBase && i == 0 {
					continue
				}
				// Besides a base, an r is the whole root changing at once (a
				// new type, a root string, a root array with nothing kept,
				// a changed reserved key): always alone, and never when an
				// object root only changed inside.
				if i > 0 || len(ops) > 1 || objectRootChangedInside(replica, state) {
					rt.Fatalf("flush = %s: an r that is not due", jsonOf(rt, ops))
				}
			}
			if wantBase && !delta.IsBase(ops) {
				rt.Fatalf("flush = %s; want a base batch", jsonOf(rt, ops))
			}
			if !wantBase && !mutated && ops != nil {
				rt.Fatalf("flush with nothing mutated = %s; want none", jsonOf(rt, ops))
			}
			prevWas := deepCopy(rt, replica)
			got, err := delta.ApplyImmutable(replica, ops)
			if err != nil {
				rt.Fatalf("ApplyImmutable(prev, %s): %v", jsonOf(rt, ops), err)
			}
			if diff := cmp.Diff(state, got); diff != "" {
				rt.Fatalf("ApplyImmutable(prev, %s) (-state +got):\n%s", jsonOf(rt, ops), diff)
			}
			if diff := cmp.Diff(prevWas, replica); diff != "" {
				rt.Fatalf("ApplyImmutable wrote prev (-before +after):\n%s", diff)
			}
			if len(ops) > 0 {
				parsed := copyOps(rt, ops)
				if diff := cmp.Diff(ops, parsed); diff != "" {
					rt.Fatalf("ParseOps(Marshal(ops)) (-ops +parsed):\n%s", diff)
				}
				inPlace, err := delta.Apply(deepCopy(rt, replica), parsed)
				if err != nil {
					rt.Fatalf("Apply: %v", err)
				}
				if diff := cmp.Diff(state, inPlace); diff != "" {
					rt.Fatalf("Apply(copy of prev, ops) (-state +got):\n%s", diff)
				}
			}
			wire, err := enc.Encode(ops)
			if err != nil {
				rt.Fatalf("Encode: %v", err)
			}
			back, err := dec.Decode(wire)
			if err != nil {
				rt.Fatalf("Decode(%s): %v", wire, err)
			}
			if len(ops) > 0 || len(back) > 0 {
				if diff := cmp.Diff(ops, back); diff != "" {
					rt.Fatalf("Decode(Encode(ops)) (-ops +back):\n%s", diff)
				}
			}
			replica = got
			wantBase, mutated = false, false
		}

		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 19).Draw(rt, "action") {
			case 0, 1, 2, 3:
				flush()
			case 4: // push, which reads the length itself
				arrs := placesOf(model, isArray)
				if len(arrs) == 0 {
					continue
				}
				l := pick(rt, "array", arrs)
				item := genValue(rt, 1)
				adopted = append(adopted, kept{"pushed item", item, deepCopy(rt, item)})
				if err := tr.Push(l.path, item); err != nil {
					rt.Fatalf("Push(%s): %v", l.path, err)
				}
				op := delta.Splice(l.path, len(l.value.([]any)), 0, []any{deepCopy(rt, item)})
				var err error
				if model, err = delta.Apply(model, []delta.Op{op}); err != nil {
					rt.Fatalf("model: %v", err)
				}
				mutated = true
			case 5:
				snap := tr.State()
				if diff := cmp.Diff(model, snap); diff != "" {
					rt.Fatalf("State mid-window (-model +state):\n%s", diff)
				}
				adopted = append(adopted, kept{"snapshot", snap, deepCopy(rt, snap)})
			case 6:
				if rapid.IntRange(0, 3).Draw(rt, "rare") != 0 {
					continue
				}
				switch rapid.IntRange(0, 2).Draw(rt, "lifecycle") {
				case 0:
					v := genValue(rt, 3)
					adopted = append(adopted, kept{"replacement", v, deepCopy(rt, v)})
					if err := tr.Replace(v); err != nil {
						rt.Fatal(err)
					}
					model, wantBase = deepCopy(rt, v), true
				case 1:
					tr.Rebase()
					wantBase = true
				case 2:
					tr.Discard()
					replica, mutated = deepCopy(rt, tr.State()), false // brought up to date out of band
				}
			default:
				op := genOp(rt, model)
				for _, v := range append([]any{op.Value}, op.Items...) {
					if isContainer(v) {
						adopted = append(adopted, kept{"payload", v, deepCopy(rt, v)})
					}
				}
				err := callTracker(tr, op)
				next, modelErr := delta.Apply(model, copyOps(rt, []delta.Op{op}))
				if !sameClass(err, modelErr) {
					rt.Fatalf("%s: tracker err %v; model err %v", jsonOf(rt, op), err, modelErr)
				}
				model = next
				mutated = mutated || err == nil
			}
		}
		flush()
		for _, k := range adopted {
			if diff := cmp.Diff(k.was, k.value); diff != "" {
				rt.Fatalf("the tracker wrote a %s it adopted (-before +after):\n%s", k.what, diff)
			}
		}
	})
}

// TestApplyIsAllOrNothing: for random batches, ApplyImmutable never writes
// its input, and Apply either agrees with it or fails at the same op and
// leaves the value as it was.
func TestApplyIsAllOrNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		v := genValue(rt, 3)
		var ops []delta.Op
		sim := v
		for range rapid.IntRange(1, 8).Draw(rt, "ops") {
			if rapid.IntRange(0, 15).Draw(rt, "replace") == 0 {
				ops = append(ops, delta.Replace(genValue(rt, 2)))
			} else {
				ops = append(ops, genOp(rt, sim))
			}
			if next, err := delta.ApplyImmutable(sim, ops[len(ops)-1:]); err == nil {
				sim = next
			}
		}
		was := deepCopy(rt, v)
		got, err := delta.ApplyImmutable(v, ops)
		if diff := cmp.Diff(was, v); diff != "" {
			rt.Fatalf("ApplyImmutable wrote its input (-before +after):\n%s", diff)
		}
		owned := deepCopy(rt, v)
		gotInPlace, errInPlace := delta.Apply(owned, copyOps(rt, ops))
		if !sameClass(err, errInPlace) {
			rt.Fatalf("ApplyImmutable err %v; Apply err %v", err, errInPlace)
		}
		if err != nil {
			var a, b *delta.OpError
			if !errors.As(err, &a) || !errors.As(errInPlace, &b) || a.Index != b.Index {
				rt.Fatalf("errors name different ops: %v; %v", err, errInPlace)
			}
			if diff := cmp.Diff(was, owned); diff != "" {
				rt.Fatalf("a rejected batch changed Apply's value (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(was, gotInPlace); diff != "" {
				rt.Fatalf("a rejected batch: Apply returned (-before +got):\n%s", diff)
			}
			if diff := cmp.Diff(was, got); diff != "" {
				rt.Fatalf("a rejected batch: ApplyImmutable returned (-before +got):\n%s", diff)
			}
			return
		}
		if diff := cmp.Diff(got, gotInPlace); diff != "" {
			rt.Fatalf("Apply and ApplyImmutable disagree (-immutable +in place):\n%s", diff)
		}
	})
}

// TestDiffReplays: ApplyImmutable(a, Diff(a, b)) == b, for b derived from a
// (sharing its untouched subtrees) and for unrelated values.
func TestDiffReplays(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a := genValue(rt, 3)
		b := a
		if rapid.Bool().Draw(rt, "unrelated") {
			b = genValue(rt, 3)
		} else {
			for range rapid.IntRange(0, 6).Draw(rt, "edits") {
				if next, err := delta.ApplyImmutable(b, []delta.Op{genOp(rt, b)}); err == nil {
					b = next
				}
			}
		}
		wasA, wasB := deepCopy(rt, a), deepCopy(rt, b)
		ops := delta.Diff(a, b)
		got, err := delta.ApplyImmutable(a, ops)
		if err != nil {
			rt.Fatalf("ApplyImmutable(a, %s): %v", jsonOf(rt, ops), err)
		}
		if diff := cmp.Diff(b, got); diff != "" {
			rt.Fatalf("ApplyImmutable(a, %s) (-b +got):\n%s", jsonOf(rt, ops), diff)
		}
		if diff := cmp.Diff(wasA, a); diff != "" {
			rt.Fatalf("Diff or ApplyImmutable wrote a:\n%s", diff)
		}
		if diff := cmp.Diff(wasB, b); diff != "" {
			rt.Fatalf("Diff wrote b:\n%s", diff)
		}
		if cmp.Equal(wasA, wasB) && len(ops) > 0 {
			rt.Fatalf("Diff of equal values = %s; want none", jsonOf(rt, ops))
		}
	})
}

// TestWireRoundTrips: random batches over a small pool of paths (so that
// paths repeat within and across batches) decode to themselves, and a
// decoder started at any base batch decodes the rest of the stream.
func TestWireRoundTrips(t *testing.T) {
	pool := []delta.Path{{"output"}, {"a", "deep"}, {"xs", 0}, {"xs", 1, "text"}, {"k"}}
	rapid.Check(t, func(rt *rapid.T) {
		enc, dec := delta.NewEncoder(), delta.NewDecoder()
		var late *delta.Decoder
		for range rapid.IntRange(1, 10).Draw(rt, "batches") {
			var ops []delta.Op
			for range rapid.IntRange(0, 8).Draw(rt, "ops") {
				p := pick(rt, "path", pool)
				switch rapid.IntRange(0, 7).Draw(rt, "verb") {
				case 0:
					ops = append(ops, delta.Replace(genValue(rt, 2)))
				case 1:
					ops = append(ops, delta.Set(p, genValue(rt, 2)))
				case 2:
					ops = append(ops, delta.Delete(p))
				case 3:
					ops = append(ops, delta.Append(p, genString(rt, "text")))
				case 4:
					ops = append(ops, delta.Truncate(p, rapid.IntRange(0, 300).Draw(rt, "count")))
				case 5:
					if rapid.Bool().Draw(rt, "root") {
						p = delta.Path{}
					}
					ops = append(ops, delta.Splice(p, rapid.IntRange(0, 3).Draw(rt, "index"),
						rapid.IntRange(0, 3).Draw(rt, "remove"), []any{genValue(rt, 1)}))
				case 6:
					ops = append(ops, delta.Reorder(p, rapid.Permutation([]int{0, 1, 2}).Draw(rt, "perm")))
				case 7:
					ops = append(ops, delta.Append(p, strconv.Itoa(len(ops))))
				}
			}
			wire, err := enc.Encode(ops)
			if err != nil {
				rt.Fatalf("Encode(%s): %v", jsonOf(rt, batchJSON(ops)), err)
			}
			if late == nil && delta.IsBase(ops) {
				late = delta.NewDecoder()
			}
			for _, d := range []*delta.Decoder{dec, late} {
				if d == nil {
					continue
				}
				back, err := d.Decode(wire)
				if err != nil {
					rt.Fatalf("Decode(%s): %v", wire, err)
				}
				if len(ops) > 0 || len(back) > 0 {
					if diff := cmp.Diff(ops, back); diff != "" {
						rt.Fatalf("Decode(%s) (-ops +back):\n%s", wire, diff)
					}
				}
			}
		}
	})
}
