package delta

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// FlushOpsMax bounds a computed batch. A diff that needs more ops than this
// is sent as one r of the whole value instead (§1.5: "more than 4096 ops
// become r").
const FlushOpsMax = 4096

// Bounds of the string rule's overlap search (§1.5). The reference counts
// UTF-16 units; this package searches UTF-8 bytes, which gives the same
// answer whenever the search is not cut short and a correct one always.
const (
	overlapScanBytesMax  = 64 << 10 // how far back into the old string to look
	overlapProbeBytes    = 64       // the long probe: the new string's head
	overlapCandidatesMax = 8        // matches of one probe that are verified
)

// arrayDiffCellsMax bounds the table of the exact longest-common-subsequence
// alignment of an array's changed middle; a larger middle is aligned on the
// elements that occur once on each side.
const arrayDiffCellsMax = 1 << 16

// Diff returns ops that turn before into after: ApplyImmutable(before,
// Diff(before, after)) equals after. Both must be values. It follows the
// rules of §1.5: strings by the string rule (append, truncate then append,
// or set), objects key by key in sorted order, arrays by aligning the
// elements they keep (containers by identity, scalars by value) into
// splices, or one m when every element only moved. A root that changes type
// or is a string becomes r, and so does a diff of more than FlushOpsMax ops.
// Containers that before and after share are skipped without being
// walked, so the cost follows the changed paths rather than the whole
// value. The ops share nothing with before or after.
func Diff(before, after any) []Op {
	var d differ
	return d.run(before, after)
}

// differ computes ops. With a Tracker's hints it follows the containers the
// tracker copied back to what it copied them from, and an object's keys in
// the order they were written.
type differ struct {
	hints map[unsafe.Pointer]*hint
	path  Path // where the differ is; ops get copies
	out   []Op
	over  bool
}

func (d *differ) run(before, after any) []Op {
	d.value(before, after)
	if d.over {
		return []Op{Replace(cloneValue(after))}
	}
	return d.out
}

func (d *differ) emit(op Op) {
	if d.over {
		return
	}
	if len(d.out) == FlushOpsMax {
		d.over, d.out = true, nil
		return
	}
	d.out = append(d.out, op)
}

func (d *differ) push(seg any) { d.path = append(d.path, seg) }
func (d *differ) pop()         { d.path = d.path[:len(d.path)-1] }

// set emits the whole of v at the current path: s, or r at the root.
func (d *differ) set(v any) {
	if len(d.path) == 0 {
		d.emit(Replace(cloneValue(v)))
		return
	}
	d.emit(Set(clonePath(d.path), cloneValue(v)))
}

func (d *differ) value(before, after any) {
	if d.over {
		return
	}
	deep := len(d.path) < PathSegmentsMax // may the differ step below here?
	switch a := after.(type) {
	case string:
		if b, ok := before.(string); ok {
			if a == b {
				return
			}
			if len(d.path) > 0 {
				d.str(b, a)
				return
			}
		}
	case map[string]any:
		if b, ok := before.(map[string]any); ok {
			if mapPtr(a) == mapPtr(b) {
				return
			}
			if deep {
				d.object(b, a)
				return
			}
			if equalValue(b, a) {
				return
			}
		}
	case []any:
		if b, ok := before.([]any); ok {
			if sameRef(a, b) {
				return
			}
			if deep {
				d.array(b, a)
				return
			}
			if equalValue(b, a) {
				return
			}
		}
	default:
		if before == after {
			return
		}
	}
	d.set(after)
}

// str applies the string rule of §1.5 at a non-root path.
func (d *differ) str(before, after string) {
	if len(after) > len(before) && strings.HasPrefix(after, before) {
		d.emit(Append(clonePath(d.path), after[len(before):]))
		return
	}
	k := overlap(before, after)
	if k == 0 {
		d.set(after)
		return
	}
	d.emit(Truncate(clonePath(d.path), utf16Len(before[:len(before)-k])))
	if len(after) > k {
		d.emit(Append(clonePath(d.path), after[k:]))
	}
}

// overlap returns the length in bytes of the longest suffix of before that
// is a prefix of after, as far as a bounded search finds it (0 when it
// gives up, which costs a larger op and is never wrong). Both are valid
// UTF-8, so every match starts and ends on rune boundaries.
func overlap(before, after string) int {
	if before == "" || after == "" {
		return 0
	}
	tail := before
	if len(tail) > overlapScanBytesMax {
		tail = tail[len(tail)-overlapScanBytesMax:]
		for tail != "" && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
	}
	long := min(overlapProbeBytes, len(after))
	for long < len(after) && !utf8.RuneStart(after[long]) {
		long--
	}
	_, first := utf8.DecodeRuneInString(after)
	// A long probe finds the long overlaps a sliding window makes in few
	// tries; one rune finds any overlap, at the price of more candidates.
	for _, probe := range []int{long, first} {
		head := after[:probe]
		tried := 0
		for from := 0; from < len(tail); {
			i := strings.Index(tail[from:], head)
			if i < 0 {
				break
			}
			k := from + i
			if tried++; tried > overlapCandidatesMax {
				break
			}
			n := len(tail) - k
			if n <= len(after) && tail[k:] == after[:n] {
				return n
			}
			from = k + 1
		}
		if probe == first {
			break
		}
	}
	return 0
}

// object diffs two objects: changed and added keys, then deleted ones.
func (d *differ) object(before, after map[string]any) {
	// A reserved key cannot be a path segment, so when one changes the whole
	// object is set.
	for _, k := range []string{"__proto__", "constructor", "prototype"} {
		b, inB := before[k]
		a, inA := after[k]
		if inB != inA || (inA && !equalValue(b, a)) {
			d.set(after)
			return
		}
	}
	var keys, deleted []string
	if h := d.hints[mapPtr(after)]; h != nil && h.origin == mapPtr(before) {
		// after is a tracker's copy of before: only the keys written since
		// can differ, and they come in the order they were first written.
		for _, k := range h.keys {
			if _, ok := after[k]; ok {
				keys = append(keys, k)
			} else if _, ok := before[k]; ok {
				deleted = append(deleted, k)
			}
		}
	} else {
		keys = slices.Sorted(maps.Keys(after))
		for k := range before {
			if _, ok := after[k]; !ok {
				deleted = append(deleted, k)
			}
		}
		slices.Sort(deleted)
	}
	for _, k := range keys {
		d.push(k)
		if b, ok := before[k]; ok {
			d.value(b, after[k])
		} else {
			d.set(after[k])
		}
		d.pop()
	}
	for _, k := range deleted {
		d.push(k)
		d.emit(Delete(clonePath(d.path)))
		d.pop()
	}
}

// array diffs two arrays. When every element only moved it emits one m.
// Otherwise it skips the common prefix and suffix, aligns the elements of
// the middle that both sides keep, and walks left to right: a kept pair is
// diffed in place, and between pairs the removed and inserted runs are
// diffed position by position as far as both go, the rest spliced.
func (d *differ) array(before, after []any) {
	n := len(before)
	if n == len(after) && n >= 2 && !equalValue(before[0], after[0]) && !equalValue(before[n-1], after[n-1]) {
		if perm := d.permutation(before, after); perm != nil {
			d.emit(Reorder(clonePath(d.path), perm))
			for i, j := range perm {
				d.push(i)
				d.value(before[j], after[i])
				d.pop()
			}
			return
		}
	}
	pre := 0
	for pre < len(before) && pre < len(after) && equalValue(before[pre], after[pre]) {
		pre++
	}
	suf := 0
	for suf < len(before)-pre && suf < len(after)-pre &&
		equalValue(before[len(before)-1-suf], after[len(after)-1-suf]) {
		suf++
	}
	bm, am := before[pre:len(before)-suf], after[pre:len(after)-suf]
	if len(bm) == 0 && len(am) == 0 {
		return
	}
	anchors := d.anchors(bm, am)
	if pre == 0 && suf == 0 && len(anchors) == 0 && len(before) != len(after) && len(before) > 0 {
		// Nothing in common and a new length: one s (r at the root), as
		// when a splice clears the whole array.
		d.set(after)
		return
	}
	at, bi, ai := pre, 0, 0
	for _, m := range anchors {
		at = d.gap(bm[bi:m[0]], am[ai:m[1]], at)
		d.push(at)
		d.value(bm[m[0]], am[m[1]])
		d.pop()
		at, bi, ai = at+1, m[0]+1, m[1]+1
	}
	d.gap(bm[bi:], am[ai:], at)
}

// gap turns the run before, which sits at index at, into the run after,
// and returns the index just past it.
func (d *differ) gap(before, after []any, at int) int {
	n := min(len(before), len(after))
	for k := range n {
		d.push(at + k)
		d.value(before[k], after[k])
		d.pop()
	}
	if len(after) > n {
		items := make([]any, len(after)-n)
		for i, v := range after[n:] {
			items[i] = cloneValue(v)
		}
		d.emit(Splice(clonePath(d.path), at+n, 0, items))
	}
	if len(before) > n {
		d.emit(Splice(clonePath(d.path), at+n, len(before)-n, nil))
	}
	return at + len(after)
}

// elemKey identifies an array element for alignment: a scalar by its value,
// a container by the published container it derives from.
type elemKey struct {
	kind byte
	text string
	ptr  unsafe.Pointer
}

func (d *differ) key(v any) elemKey {
	switch x := v.(type) {
	case nil:
		return elemKey{kind: 'n'}
	case bool:
		if x {
			return elemKey{kind: 't'}
		}
		return elemKey{kind: 'f'}
	case string:
		return elemKey{kind: 's', text: x}
	case json.Number:
		return elemKey{kind: '#', text: string(x)}
	case []any:
		return elemKey{kind: '[', ptr: d.origin(v)}
	case map[string]any:
		if len(x) == 0 {
			return elemKey{kind: '{'}
		}
		return elemKey{kind: '{', ptr: d.origin(v)}
	default:
		assert(false, "values hold only JSON types")
		return elemKey{}
	}
}

func (d *differ) origin(v any) unsafe.Pointer {
	p := containerPtr(v)
	if h := d.hints[p]; h != nil {
		return h.origin
	}
	return p
}

func (d *differ) keys(vs []any) []elemKey {
	ks := make([]elemKey, len(vs))
	for i, v := range vs {
		ks[i] = d.key(v)
	}
	return ks
}

// permutation returns perm with after[i] ≅ before[perm[i]] for every i, or
// nil when after is not a reordering of before or is before unmoved.
func (d *differ) permutation(before, after []any) []int {
	at := make(map[elemKey][]int, len(before))
	for i, k := range d.keys(before) {
		at[k] = append(at[k], i)
	}
	perm := make([]int, len(after))
	moved := false
	for i, k := range d.keys(after) {
		js := at[k]
		if len(js) == 0 {
			return nil
		}
		perm[i], at[k] = js[0], js[1:]
		moved = moved || perm[i] != i
	}
	if !moved {
		return nil
	}
	return perm
}

// anchors aligns before and after: pairs (i, j), increasing in both, of
// elements with equal keys.
func (d *differ) anchors(before, after []any) [][2]int {
	if len(before) == 0 || len(after) == 0 {
		return nil
	}
	bk, ak := d.keys(before), d.keys(after)
	if len(bk)*len(ak) <= arrayDiffCellsMax {
		return lcs(bk, ak)
	}
	return patience(bk, ak)
}

// lcs is an exact longest common subsequence.
func lcs(b, a []elemKey) [][2]int {
	w := len(a) + 1
	table := make([]int32, (len(b)+1)*w)
	for i := len(b) - 1; i >= 0; i-- {
		for j := len(a) - 1; j >= 0; j-- {
			if b[i] == a[j] {
				table[i*w+j] = table[(i+1)*w+j+1] + 1
			} else {
				table[i*w+j] = max(table[(i+1)*w+j], table[i*w+j+1])
			}
		}
	}
	var out [][2]int
	for i, j := 0, 0; i < len(b) && j < len(a); {
		switch {
		case b[i] == a[j]:
			out = append(out, [2]int{i, j})
			i, j = i+1, j+1
		case table[(i+1)*w+j] >= table[i*w+j+1]:
			i++
		default:
			j++
		}
	}
	return out
}

// patience aligns the elements that occur exactly once on each side, by a
// longest increasing subsequence of their positions.
func patience(b, a []elemKey) [][2]int {
	count := make(map[elemKey]int, len(b))
	for _, k := range b {
		count[k]++
	}
	where := make(map[elemKey]int, len(b))
	for i, k := range b {
		if count[k] == 1 {
			where[k] = i
		}
	}
	seenA := make(map[elemKey]int, len(a))
	for _, k := range a {
		seenA[k]++
	}
	var pairs [][2]int
	for j, k := range a {
		if i, ok := where[k]; ok && seenA[k] == 1 {
			pairs = append(pairs, [2]int{i, j})
		}
	}
	// Longest subsequence of pairs increasing in i (j already increases).
	var tails []int // tails[l]: index into pairs of the smallest end of a run of length l+1
	prev := make([]int, len(pairs))
	for p, pair := range pairs {
		l, _ := slices.BinarySearchFunc(tails, pair[0], func(t, i int) int { return pairs[t][0] - i })
		if l > 0 {
			prev[p] = tails[l-1]
		} else {
			prev[p] = -1
		}
		if l == len(tails) {
			tails = append(tails, p)
		} else {
			tails[l] = p
		}
	}
	if len(tails) == 0 {
		return nil
	}
	out := make([][2]int, len(tails))
	for p, l := tails[len(tails)-1], len(tails)-1; l >= 0; l-- {
		out[l] = pairs[p]
		p = prev[p]
	}
	return out
}
