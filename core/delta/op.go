package delta

import (
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf8"
)

// Verb names an op; its string is the tuple's first element.
type Verb string

// The verbs of §1.2.
const (
	VerbReplace  Verb = "r" // ["r", value]
	VerbSet      Verb = "s" // ["s", path, value]
	VerbDelete   Verb = "d" // ["d", path]
	VerbAppend   Verb = "a" // ["a", path, text]
	VerbTruncate Verb = "t" // ["t", path, n]
	VerbSplice   Verb = "p" // ["p", path, index, remove, items]
	VerbReorder  Verb = "m" // ["m", path, perm]
)

// Op is one change to a value. Only the fields of its verb may be set; the
// others stay zero, so an Op and its tuple convert one to one. Build ops
// with Replace, Set, Delete, Append, Truncate, Splice and Reorder.
type Op struct {
	Verb Verb
	// Path is the target: of the string for a and t, of the array itself for
	// p and m (where Path{} is a root array), of the element or key for s
	// and d. It must be non-empty for s, d, a and t, and is nil for r.
	Path Path
	// Value is the new root (r) or the new element (s).
	Value any
	// Text is appended (a).
	Text string
	// Count is how many UTF-16 code units to drop from the front (t).
	Count int
	// Index, Remove and Items are the splice (p): remove Remove elements at
	// Index (clamped to the end), then insert Items there.
	Index  int
	Remove int
	Items  []any
	// Perm is the reorder (m): new[i] = old[Perm[i]].
	Perm []int
}

// Replace is ["r", v].
func Replace(v any) Op { return Op{Verb: VerbReplace, Value: v} }

// Set is ["s", path, v].
func Set(path Path, v any) Op { return Op{Verb: VerbSet, Path: path, Value: v} }

// Delete is ["d", path].
func Delete(path Path) Op { return Op{Verb: VerbDelete, Path: path} }

// Append is ["a", path, text].
func Append(path Path, text string) Op { return Op{Verb: VerbAppend, Path: path, Text: text} }

// Truncate is ["t", path, n]: drop the first n UTF-16 code units.
func Truncate(path Path, n int) Op { return Op{Verb: VerbTruncate, Path: path, Count: n} }

// Splice is ["p", path, index, remove, items].
func Splice(path Path, index, remove int, items []any) Op {
	if path == nil {
		path = Path{}
	}
	if items == nil {
		items = []any{}
	}
	return Op{Verb: VerbSplice, Path: path, Index: index, Remove: remove, Items: items}
}

// Reorder is ["m", path, perm].
func Reorder(path Path, perm []int) Op {
	if path == nil {
		path = Path{}
	}
	if perm == nil {
		perm = []int{}
	}
	return Op{Verb: VerbReorder, Path: path, Perm: perm}
}

// IsBase reports whether a batch starts with r, which makes it a recovery
// point: a replica can start from it.
func IsBase(ops []Op) bool {
	return len(ops) > 0 && ops[0].Verb == VerbReplace
}

// checkOp returns why op is malformed on its own, or nil. It does not look
// at any value the op might be applied to.
func checkOp(op Op) *OpError {
	f := checkShape(op)
	if f == nil {
		f = checkUnused(op)
	}
	if f != nil {
		f.Op = string(op.Verb)
	}
	return f
}

func checkShape(op Op) *OpError {
	switch op.Verb {
	case VerbReplace:
		if len(op.Path) > 0 {
			return fault(ErrMalformed, "r carries no path")
		}
		return checkPayload("value", op.Value)
	case VerbSet:
		if f := checkTargetPath(op.Path); f != nil {
			return f
		}
		return checkPayload("value", op.Value)
	case VerbDelete:
		return checkTargetPath(op.Path)
	case VerbAppend:
		if f := checkTargetPath(op.Path); f != nil {
			return f
		}
		if !utf8.ValidString(op.Text) {
			return fault(ErrMalformed, "text is not valid UTF-8")
		}
		return nil
	case VerbTruncate:
		if f := checkTargetPath(op.Path); f != nil {
			return f
		}
		if op.Count < 0 {
			return fault(ErrMalformed, "count %d is negative", op.Count)
		}
		return nil
	case VerbSplice:
		if f := checkPath(op.Path); f != nil {
			return f
		}
		if op.Index < 0 || op.Remove < 0 {
			return fault(ErrMalformed, "index %d and remove %d must not be negative", op.Index, op.Remove)
		}
		for i, item := range op.Items {
			if r := checkValue(item); r != "" {
				return fault(ErrMalformed, "items[%d]: %s", i, r)
			}
		}
		return nil
	case VerbReorder:
		if f := checkPath(op.Path); f != nil {
			return f
		}
		seen := make([]bool, len(op.Perm))
		for i, j := range op.Perm {
			if j < 0 || j >= len(op.Perm) || seen[j] {
				return fault(ErrMalformed, "perm is not a permutation of 0..%d (element %d is %d)", len(op.Perm)-1, i, j)
			}
			seen[j] = true
		}
		return nil
	default:
		return fault(ErrMalformed, "unknown verb %q", string(op.Verb))
	}
}

// checkTargetPath checks the path of s, d, a and t, which cannot address
// the root: only r replaces it.
func checkTargetPath(p Path) *OpError {
	if len(p) == 0 {
		return fault(ErrMalformed, "path is empty; only r replaces the root")
	}
	return checkPath(p)
}

func checkPayload(name string, v any) *OpError {
	if r := checkValue(v); r != "" {
		return fault(ErrMalformed, "%s: %s", name, r)
	}
	return nil
}

// checkUnused rejects fields that belong to another verb: they would be
// lost on the way to JSON and back.
func checkUnused(op Op) *OpError {
	var field string
	switch {
	case op.Value != nil && op.Verb != VerbReplace && op.Verb != VerbSet:
		field = "Value"
	case op.Text != "" && op.Verb != VerbAppend:
		field = "Text"
	case op.Count != 0 && op.Verb != VerbTruncate:
		field = "Count"
	case (op.Index != 0 || op.Remove != 0 || op.Items != nil) && op.Verb != VerbSplice:
		field = "Index, Remove or Items"
	case op.Perm != nil && op.Verb != VerbReorder:
		field = "Perm"
	default:
		return nil
	}
	return fault(ErrMalformed, "%s is set but %s does not take it", field, string(op.Verb))
}

// fieldCount is how many tuple elements follow the path, per verb.
var fieldCount = map[Verb]int{
	VerbSet:      1,
	VerbDelete:   0,
	VerbAppend:   1,
	VerbTruncate: 1,
	VerbSplice:   3,
	VerbReorder:  1,
}

// fields are the tuple elements after the path.
func fields(op Op) []any {
	switch op.Verb {
	case VerbSet:
		return []any{op.Value}
	case VerbAppend:
		return []any{op.Text}
	case VerbTruncate:
		return []any{op.Count}
	case VerbSplice:
		items := op.Items
		if items == nil {
			items = []any{}
		}
		return []any{op.Index, op.Remove, items}
	case VerbReorder:
		perm := op.Perm
		if perm == nil {
			perm = []int{}
		}
		return []any{perm}
	default:
		return nil
	}
}

// pathJSON is p as a JSON array; a nil path is still [].
func pathJSON(p Path) []any {
	if p == nil {
		return []any{}
	}
	return p
}

// MarshalJSON writes the op's tuple, after checking that it is well formed.
func (op Op) MarshalJSON() ([]byte, error) {
	if f := checkOp(op); f != nil {
		return nil, f
	}
	if op.Verb == VerbReplace {
		return json.Marshal([]any{string(op.Verb), op.Value})
	}
	return json.Marshal(append([]any{string(op.Verb), pathJSON(op.Path)}, fields(op)...))
}

// UnmarshalJSON reads one tuple as strictly as ParseOps does.
func (op *Op) UnmarshalJSON(data []byte) error {
	x, f := decodeJSON(data, "op")
	if f == nil {
		*op, f = parseOp(x)
	}
	if f != nil {
		return f
	}
	return nil
}

// ParseOps reads a batch: a JSON array of op tuples. It is strict: an
// unknown verb, a wrong arity, a bad path or count fails the whole batch
// with an *OpError naming the op's index.
func ParseOps(data []byte) ([]Op, error) {
	raw, f := decodeBatch(data)
	if f != nil {
		return nil, f
	}
	ops := make([]Op, len(raw))
	for i, x := range raw {
		op, f := parseOp(x)
		if f != nil {
			return nil, f.at(i, "")
		}
		ops[i] = op
	}
	return ops, nil
}

// decodeJSON decodes one JSON value with numbers as json.Number.
func decodeJSON(data []byte, what string) (any, *OpError) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, fault(ErrMalformed, "%s is not JSON: %v", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fault(ErrMalformed, "%s is followed by more data", what)
	}
	return x, nil
}

// decodeBatch decodes a JSON array of tuples.
func decodeBatch(data []byte) ([]any, *OpError) {
	x, f := decodeJSON(data, "batch")
	if f != nil {
		return nil, f
	}
	raw, ok := x.([]any)
	if !ok {
		return nil, fault(ErrMalformed, "batch is %s; want an array", aKind(x))
	}
	return raw, nil
}

// tupleVerb reads a tuple's verb.
func tupleVerb(x any) ([]any, Verb, *OpError) {
	arr, ok := x.([]any)
	if !ok || len(arr) == 0 {
		return nil, "", fault(ErrMalformed, "op is not a non-empty array")
	}
	verb, ok := arr[0].(string)
	if !ok {
		return nil, "", fault(ErrMalformed, "verb is %s; want a string", aKind(arr[0]))
	}
	return arr, Verb(verb), nil
}

// parseOp reads one decoded tuple with its path inline.
func parseOp(x any) (Op, *OpError) {
	arr, verb, f := tupleVerb(x)
	if f != nil {
		return Op{}, f
	}
	op, f := parseTuple(arr, verb)
	if f != nil {
		f.Op = string(verb)
		return Op{}, f
	}
	return op, nil
}

func parseTuple(arr []any, verb Verb) (Op, *OpError) {
	if verb == VerbReplace {
		if len(arr) != 2 {
			return Op{}, arityFault(verb, 2, len(arr))
		}
		return Replace(arr[1]), nil
	}
	n, known := fieldCount[verb]
	if !known {
		return Op{}, fault(ErrMalformed, "unknown verb %q", string(verb))
	}
	if len(arr) != 2+n {
		return Op{}, arityFault(verb, 2+n, len(arr))
	}
	path, f := pathOf(arr[1])
	if f != nil {
		return Op{}, f
	}
	return opFromFields(verb, path, arr[2:])
}

func arityFault(verb Verb, want, got int) *OpError {
	return fault(ErrMalformed, "%s takes %d elements, got %d", string(verb), want, got)
}

// opFromFields builds an op from its path and the decoded elements after
// it, then checks it.
func opFromFields(verb Verb, path Path, rest []any) (Op, *OpError) {
	var op Op
	switch verb {
	case VerbSet:
		op = Set(path, rest[0])
	case VerbDelete:
		op = Delete(path)
	case VerbAppend:
		text, ok := rest[0].(string)
		if !ok {
			return Op{}, fault(ErrMalformed, "text is %s; want a string", aKind(rest[0]))
		}
		op = Append(path, text)
	case VerbTruncate:
		n, f := countOf("count", rest[0])
		if f != nil {
			return Op{}, f
		}
		op = Truncate(path, n)
	case VerbSplice:
		index, f := countOf("index", rest[0])
		if f != nil {
			return Op{}, f
		}
		remove, f := countOf("remove", rest[1])
		if f != nil {
			return Op{}, f
		}
		items, ok := rest[2].([]any)
		if !ok {
			return Op{}, fault(ErrMalformed, "items is %s; want an array", aKind(rest[2]))
		}
		op = Splice(path, index, remove, items)
	case VerbReorder:
		raw, ok := rest[0].([]any)
		if !ok {
			return Op{}, fault(ErrMalformed, "perm is %s; want an array", aKind(rest[0]))
		}
		perm := make([]int, len(raw))
		for i, e := range raw {
			n, f := countOf("perm element", e)
			if f != nil {
				return Op{}, f
			}
			perm[i] = n
		}
		op = Reorder(path, perm)
	default:
		assert(false, "opFromFields is only called with a known verb")
	}
	if f := checkOp(op); f != nil {
		return Op{}, f
	}
	return op, nil
}

// countOf reads a non-negative integer.
func countOf(name string, x any) (int, *OpError) {
	num, ok := x.(json.Number)
	if !ok {
		return 0, fault(ErrMalformed, "%s is %s; want an integer", name, aKind(x))
	}
	n, ok := intOf(num)
	if !ok || n < 0 {
		return 0, fault(ErrMalformed, "%s is %s; want an integer ≥ 0", name, string(num))
	}
	return n, nil
}
