package core

import (
	"bytes"
	"slices"

	"github.com/pico-go/pico/internal/plant"
)

// Merging a task state's patch is on the path of every task commit, so the
// common case skips the maps: two compact objects are spliced member by
// member. The result is byte for byte what unmarshalling both into maps
// and marshalling the merge gives (keys sorted, a patch key replacing the
// state's); anything the splice cannot vouch for that way takes the maps.

// member is one top-level member of a JSON object: its key without the
// quotes and its value.
type member struct{ key, val []byte }

// mergeObjects merges patch's members into base's. ok is false unless both
// are compact objects with plain ASCII keys, no key twice, and no byte
// json.Marshal would escape (<, >, &, U+2028, U+2029).
func mergeObjects(base, patch []byte) (out []byte, ok bool) {
	// A task state has a handful of keys: the member lists stay on the
	// stack unless one has more than stateMembersMax.
	var bbuf, pbuf [stateMembersMax]member
	var mbuf [2 * stateMembersMax]member
	bm, ok := objectMembers(base, bbuf[:0])
	if !ok {
		return nil, false
	}
	pm, ok := objectMembers(patch, pbuf[:0])
	if !ok {
		return nil, false
	}
	merged := mbuf[:0]
	i, j := 0, 0
	for i < len(bm) || j < len(pm) {
		switch {
		case j == len(pm) || (i < len(bm) && (bytes.Compare(bm[i].key, pm[j].key) < 0 || plant.On("state-merge-keeps-both") && bytes.Equal(bm[i].key, pm[j].key))):
			merged = append(merged, bm[i])
			i++
		case i == len(bm) || bytes.Compare(bm[i].key, pm[j].key) > 0:
			merged = append(merged, pm[j])
			j++
		default: // the same key: the patch's value wins
			merged = append(merged, pm[j])
			i++
			j++
		}
	}
	size := 2
	for _, m := range merged {
		size += len(m.key) + len(m.val) + 4
	}
	out = make([]byte, 0, size)
	out = append(out, '{')
	for k, m := range merged {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.key...)
		out = append(out, '"', ':')
		out = append(out, m.val...)
	}
	return append(out, '}'), true
}

// stateMembersMax is how many members of a task state and of its patch
// mergeObjects keeps without allocating.
const stateMembersMax = 12

// objectMembers splits a compact JSON object into its members, sorted by
// key, appended to ms. It assumes valid JSON (a stored state or a
// marshalled patch) and reports !ok for what the splice does not handle.
func objectMembers(obj []byte, ms []member) ([]member, bool) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' || !plainText(obj) {
		return nil, false
	}
	pos := 1
	if obj[pos] == '}' {
		return ms, pos == len(obj)-1
	}
	for {
		if obj[pos] != '"' {
			return nil, false
		}
		end := pos + 1
		for end < len(obj) && obj[end] != '"' {
			if c := obj[end]; c == '\\' || c < 0x20 || c >= 0x80 {
				return nil, false
			}
			end++
		}
		if end+1 >= len(obj) || obj[end+1] != ':' {
			return nil, false
		}
		key := obj[pos+1 : end]
		vstart := end + 2
		vend, ok := valueEnd(obj, vstart)
		if !ok {
			return nil, false
		}
		ms = append(ms, member{key: key, val: obj[vstart:vend]})
		switch {
		case vend == len(obj)-1 && obj[vend] == '}':
			slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
			for k := 1; k < len(ms); k++ {
				if bytes.Equal(ms[k-1].key, ms[k].key) {
					return nil, false // a key twice: the maps decide which wins
				}
			}
			return ms, true
		case obj[vend] == ',':
			pos = vend + 1
		default:
			return nil, false
		}
	}
}

// valueEnd returns the index just past the compact JSON value starting at
// i; ok is false on whitespace outside a string or an unbalanced value.
func valueEnd(b []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return 0, false
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		case ' ', '\t', '\n', '\r':
			return 0, false
		}
	}
	return 0, false
}

// plainText reports whether b holds nothing json.Marshal would escape in
// a raw value: no <, >, & and no U+2028 or U+2029.
func plainText(b []byte) bool {
	if bytes.ContainsAny(b, "<>&") {
		return false
	}
	for i := bytes.IndexByte(b, 0xe2); i >= 0; {
		if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9) {
			return false
		}
		next := bytes.IndexByte(b[i+1:], 0xe2)
		if next < 0 {
			break
		}
		i += next + 1
	}
	return true
}
