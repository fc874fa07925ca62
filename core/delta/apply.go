package delta

import (
	"maps"
	"slices"
	"unsafe"

	"github.com/pico-go/pico/internal/plant"
)

// Apply applies a batch to value and returns the new root, which an r may
// have replaced.
//
// It works in place and adopts: the maps and slices of value are written
// directly, and the containers that r, s and p carry become part of the
// result by reference (later ops in the batch, or in later batches, may
// write into them). So value must be a tree that the caller owns outright —
// not one that shares subtrees with another live value, such as a result of
// ApplyImmutable or a Tracker's State — and a batch must not be applied
// again after Apply took it; use ApplyImmutable to fan one batch out.
//
// Unlike the reference's apply, a failing batch changes nothing: Apply logs
// every write and undoes them all before it returns the *OpError, which
// names the failing op's index. On error it returns value.
func Apply(value any, ops []Op) (any, error) {
	e := editor{inPlace: true}
	root := value
	for i, op := range ops {
		next, f := e.checkAndDo(root, op)
		if f != nil {
			e.rollback()
			return value, f.at(i, op.Verb)
		}
		root = next
	}
	return root, nil
}

// ApplyImmutable applies a batch without writing to value or to any payload
// of ops: before it writes a container it copies it, and every container it
// does not need to write stays shared between value and the result (as do
// the payloads the result takes up). One batch can therefore be applied to
// several replicas, and value stays valid afterwards.
//
// A failing batch returns value and an *OpError naming the failing op.
func ApplyImmutable(value any, ops []Op) (any, error) {
	var e editor
	root := value
	for i, op := range ops {
		next, f := e.checkAndDo(root, op)
		if f != nil {
			return value, f.at(i, op.Verb)
		}
		root = next
	}
	return root, nil
}

// editor performs checked ops under one of two policies.
//
// In place (Apply): containers are written directly and each write is
// logged for rollback. A structural change of an array makes a new slice
// (or appends beyond the old length) and writes it into the holder, so the
// old slice header still reads its old elements and rollback is exact.
//
// Copy-on-write (ApplyImmutable, Tracker): only containers this editor made
// (owned) are written; any other one is shallow-copied first and the copy
// written into its (likewise copied) holder, up to the root. An op that
// fails writes nothing: every check precedes the first write.
type editor struct {
	inPlace bool
	undo    []undoStep
	owned   map[unsafe.Pointer]struct{}
	// keepHints, set by a Tracker, records in hints, for each container
	// copied in the current window, the published container it derives from
	// and the keys written to it, in order; Flush diffs with them.
	keepHints bool
	hints     map[unsafe.Pointer]*hint
	// tails and lastTails, kept only for a Tracker, are the buffers behind
	// the strings it grew in this window and the one before, by their first
	// byte. A buffer's length is that of the longest string viewing it, and
	// only bytes past it are ever written, so every string already handed
	// out keeps its bytes. Without them, streaming a text of n bytes in
	// tokens would copy O(n²) bytes; with them a text that keeps growing
	// keeps its buffer, and one that stopped is let go a window later.
	tails, lastTails map[*byte][]byte
}

// undoStep restores one slot: key of m, or element i of s.
type undoStep struct {
	m   map[string]any
	key string
	had bool
	s   []any
	i   int
	old any
}

// hint is what a Tracker knows about a container it copied this window.
type hint struct {
	origin unsafe.Pointer // the published container this one derives from
	keys   []string       // keys written, first write first (maps only)
	seen   map[string]struct{}
}

func (h *hint) touch(key string) {
	if _, ok := h.seen[key]; ok || plant.On("hint-keeps-first-key") && len(h.keys) > 0 {
		return
	}
	if h.seen == nil {
		h.seen = make(map[string]struct{})
	}
	h.seen[key] = struct{}{}
	h.keys = append(h.keys, key)
}

func (e *editor) checkAndDo(root any, op Op) (any, *OpError) {
	if f := checkOp(op); f != nil {
		return nil, f
	}
	return e.do(root, op)
}

// do applies one well-formed op to root and returns the new root.
func (e *editor) do(root any, op Op) (any, *OpError) {
	switch op.Verb {
	case VerbReplace:
		return op.Value, nil
	case VerbSplice, VerbReorder:
		return e.edit(root, op.Path, 0, func(target any) (any, *OpError) {
			return e.arrayOp(target, op)
		})
	default:
		parent := op.Path[:len(op.Path)-1]
		return e.edit(root, parent, 0, func(holder any) (any, *OpError) {
			return e.childOp(holder, op)
		})
	}
}

// edit walks path from holder, lets fn turn the container at its end into
// its new version, and returns holder's new version.
func (e *editor) edit(holder any, path Path, depth int, fn func(any) (any, *OpError)) (any, *OpError) {
	if depth == len(path) {
		return fn(holder)
	}
	switch h := holder.(type) {
	case map[string]any:
		key, ok := path[depth].(string)
		if !ok {
			return nil, fault(ErrPath, "%s: index on an object", path[:depth+1])
		}
		child, ok := h[key]
		if !ok {
			return nil, fault(ErrPath, "%s: no such key", path[:depth+1])
		}
		next, f := e.edit(child, path, depth+1, fn)
		if f != nil {
			return nil, f
		}
		if sameRef(child, next) {
			return h, nil
		}
		w := e.writableMap(h)
		e.setKey(w, key, next)
		return w, nil
	case []any:
		i, ok := path[depth].(int)
		if !ok {
			return nil, fault(ErrPath, "%s: key on an array", path[:depth+1])
		}
		if i >= len(h) {
			return nil, fault(ErrRange, "%s: index past the end (length %d)", path[:depth+1], len(h))
		}
		child := h[i]
		next, f := e.edit(child, path, depth+1, fn)
		if f != nil {
			return nil, f
		}
		if sameRef(child, next) {
			return h, nil
		}
		w := e.writableSlice(h)
		e.setIndex(w, i, next)
		return w, nil
	default:
		return nil, fault(ErrPath, "%s: steps into %s", path[:depth+1], aKind(holder))
	}
}

// childOp applies s, d, a or t to the container that holds its target and
// returns the container's new version.
func (e *editor) childOp(holder any, op Op) (any, *OpError) {
	last := op.Path[len(op.Path)-1]
	switch h := holder.(type) {
	case map[string]any:
		key, ok := last.(string)
		if !ok {
			return nil, fault(ErrPath, "%s: index on an object", op.Path)
		}
		switch op.Verb {
		case VerbSet:
			w := e.writableMap(h)
			e.setKey(w, key, op.Value)
			return w, nil
		case VerbDelete:
			// Deleting a key that is not there is a no-op, as in the
			// reference (JavaScript's delete).
			if _, ok := h[key]; !ok {
				return h, nil
			}
			w := e.writableMap(h)
			e.deleteKey(w, key)
			return w, nil
		default: // a, t
			cur, ok := h[key]
			if !ok {
				return nil, fault(ErrPath, "%s: no such key", op.Path)
			}
			s, f := e.editString(cur, op)
			if f != nil {
				return nil, f
			}
			w := e.writableMap(h)
			e.setKey(w, key, s)
			return w, nil
		}
	case []any:
		i, ok := last.(int)
		if !ok {
			return nil, fault(ErrPath, "%s: key on an array", op.Path)
		}
		switch op.Verb {
		case VerbSet:
			if i == len(h) {
				return e.splice(h, i, 0, []any{op.Value}), nil
			}
			if i > len(h) {
				return nil, fault(ErrRange, "%s: index past the end (length %d; only index == length appends)", op.Path, len(h))
			}
			w := e.writableSlice(h)
			e.setIndex(w, i, op.Value)
			return w, nil
		case VerbDelete:
			if i >= len(h) {
				return nil, fault(ErrRange, "%s: index past the end (length %d)", op.Path, len(h))
			}
			return e.splice(h, i, 1, nil), nil
		default: // a, t
			if i >= len(h) {
				return nil, fault(ErrRange, "%s: index past the end (length %d)", op.Path, len(h))
			}
			s, f := e.editString(h[i], op)
			if f != nil {
				return nil, f
			}
			w := e.writableSlice(h)
			e.setIndex(w, i, s)
			return w, nil
		}
	default:
		return nil, fault(ErrPath, "%s: the parent is %s", op.Path, aKind(holder))
	}
}

// editString applies a or t to the current value cur.
func (e *editor) editString(cur any, op Op) (string, *OpError) {
	s, ok := cur.(string)
	if !ok {
		return "", fault(ErrType, "%s: target is %s; %s needs a string", op.Path, aKind(cur), string(op.Verb))
	}
	if op.Verb == VerbAppend {
		return e.concat(s, op.Text), nil
	}
	out, f := dropUTF16(s, op.Count)
	if f != nil {
		f.Reason = op.Path.String() + ": " + f.Reason
	}
	return out, f
}

// concat returns s+text. A Tracker appends into the spare room of the
// buffer behind s when s is the longest string viewing it, and otherwise
// moves s into a new buffer with room to grow.
func (e *editor) concat(s, text string) string {
	if !e.keepHints || text == "" {
		return s + text
	}
	if s != "" {
		start := unsafe.StringData(s)
		buf, ok := e.tails[start]
		if !ok {
			buf, ok = e.lastTails[start]
		}
		if ok && len(buf) == len(s) && cap(buf)-len(buf) >= len(text) {
			buf = append(buf, text...)
			e.keepTail(buf)
			return unsafe.String(start, len(buf))
		}
	}
	n := len(s) + len(text)
	buf := make([]byte, n, 2*n)
	copy(buf, s)
	copy(buf[len(s):], text)
	e.keepTail(buf)
	return unsafe.String(&buf[0], n)
}

func (e *editor) keepTail(buf []byte) {
	if e.tails == nil {
		e.tails = make(map[*byte][]byte)
	}
	e.tails[&buf[0]] = buf
}

// nextWindow lets go of the buffers not grown in the window that ends.
func (e *editor) nextWindow() {
	e.lastTails, e.tails = e.tails, nil
	e.owned = nil
	e.hints = nil
}

// arrayOp applies p or m to the array at its path and returns the array's
// new version.
func (e *editor) arrayOp(target any, op Op) (any, *OpError) {
	arr, ok := target.([]any)
	if !ok {
		return nil, fault(ErrType, "%s: target is %s; %s needs an array", op.Path, aKind(target), string(op.Verb))
	}
	if op.Verb == VerbSplice {
		if op.Index > len(arr) {
			return nil, fault(ErrRange, "%s: splice index %d past the end (length %d)", op.Path, op.Index, len(arr))
		}
		remove := min(op.Remove, len(arr)-op.Index)
		if plant.On("splice-clamp-keeps-last") && op.Remove >= len(arr)-op.Index && remove > 0 {
			remove--
		}
		return e.splice(arr, op.Index, remove, op.Items), nil
	}
	if len(op.Perm) != len(arr) {
		return nil, fault(ErrRange, "%s: perm has %d elements; the array has %d", op.Path, len(op.Perm), len(arr))
	}
	identity := true
	for i, j := range op.Perm {
		identity = identity && i == j
	}
	if identity {
		return arr, nil
	}
	w := make([]any, len(arr))
	for i, j := range op.Perm {
		if plant.On("reorder-applied-inverse") {
			w[j] = arr[i]
			continue
		}
		w[i] = arr[j]
	}
	e.own(w, arr)
	return w, nil
}

// splice returns arr with remove elements at index replaced by items. It
// never shifts elements within arr: the result is a new slice, or arr
// extended past its length when that is safe.
func (e *editor) splice(arr []any, index, remove int, items []any) []any {
	if remove == 0 && len(items) == 0 {
		return arr
	}
	if remove == 0 && index == len(arr) && cap(arr)-len(arr) >= len(items) &&
		(e.inPlace || e.isOwned(slicePtr(arr))) {
		return append(arr, items...)
	}
	n := len(arr) - remove + len(items)
	c := n
	if index == len(arr) {
		c += n / 2 // room for the next push in the same window
	}
	w := make([]any, n, c)
	copy(w, arr[:index])
	copy(w[index:], items)
	copy(w[index+len(items):], arr[index+remove:])
	e.own(w, arr)
	return w
}

func (e *editor) isOwned(p unsafe.Pointer) bool {
	if p == nil {
		return false
	}
	_, ok := e.owned[p]
	return ok
}

// own records that the editor made c from from.
func (e *editor) own(c, from any) {
	if e.inPlace {
		return
	}
	p := containerPtr(c)
	if p == nil {
		return
	}
	if e.owned == nil {
		e.owned = make(map[unsafe.Pointer]struct{})
	}
	e.owned[p] = struct{}{}
	if !e.keepHints {
		return
	}
	if e.hints == nil {
		e.hints = make(map[unsafe.Pointer]*hint)
	}
	h := &hint{origin: e.originOf(from)}
	if prev := e.hints[containerPtr(from)]; prev != nil {
		for _, k := range prev.keys {
			h.touch(k)
		}
	}
	e.hints[p] = h
}

// originOf is the published container v derives from: itself, unless it was
// copied in this window.
func (e *editor) originOf(v any) unsafe.Pointer {
	p := containerPtr(v)
	if h := e.hints[p]; h != nil {
		return h.origin
	}
	return p
}

func (e *editor) writableMap(m map[string]any) map[string]any {
	if e.inPlace || e.isOwned(mapPtr(m)) {
		return m
	}
	c := maps.Clone(m)
	e.own(c, m)
	return c
}

func (e *editor) writableSlice(s []any) []any {
	if e.inPlace || e.isOwned(slicePtr(s)) {
		return s
	}
	c := slices.Clone(s)
	e.own(c, s)
	return c
}

func (e *editor) setKey(m map[string]any, key string, v any) {
	if e.inPlace {
		old, had := m[key]
		e.undo = append(e.undo, undoStep{m: m, key: key, had: had, old: old})
	}
	m[key] = v
	e.touch(m, key)
}

func (e *editor) deleteKey(m map[string]any, key string) {
	if e.inPlace {
		e.undo = append(e.undo, undoStep{m: m, key: key, had: true, old: m[key]})
	}
	delete(m, key)
	if plant.On("delete-key-keeps-null") {
		m[key] = nil
	}
	e.touch(m, key)
}

func (e *editor) setIndex(s []any, i int, v any) {
	if e.inPlace {
		e.undo = append(e.undo, undoStep{s: s, i: i, old: s[i]})
	}
	s[i] = v
}

func (e *editor) touch(m map[string]any, key string) {
	if !e.keepHints {
		return
	}
	h := e.hints[mapPtr(m)]
	assert(h != nil, "a tracker writes only maps it copied in the current window")
	h.touch(key)
}

// rollback undoes every logged write, newest first.
func (e *editor) rollback() {
	for i := len(e.undo) - 1; i >= 0; i-- {
		u := e.undo[i]
		switch {
		case u.m == nil:
			u.s[u.i] = u.old
		case u.had:
			u.m[u.key] = u.old
		default:
			delete(u.m, u.key)
		}
	}
	e.undo = nil
}
