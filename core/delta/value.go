package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// ValueOf is a Go value in this package's representation: its JSON
// encoding, decoded as ParseValue does. A kind builds a preview's base from
// its own types with it.
func ValueOf(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("delta: value: %w", err)
	}
	return ParseValue(raw)
}

// ParseValue decodes one JSON value into this package's representation
// (numbers as json.Number, objects map[string]any, arrays []any). Invalid
// UTF-8 and lone surrogate escapes become U+FFFD, as encoding/json does
// everywhere; of a key given twice the last wins.
func ParseValue(data []byte) (any, error) {
	v, err := jsonvalue.Parse(data)
	switch {
	case errors.Is(err, jsonvalue.ErrTrailing):
		return nil, errors.New("delta: value is followed by more data")
	case err != nil:
		return nil, fmt.Errorf("delta: value is not JSON: %w", err)
	}
	return v, nil
}

// checkValue returns why v is not a value, or "" when it is one.
func checkValue(v any) string {
	switch x := v.(type) {
	case nil, bool:
		return ""
	case string:
		if !utf8.ValidString(x) {
			return "string is not valid UTF-8"
		}
		return ""
	case json.Number:
		if !validNumber(string(x)) {
			return fmt.Sprintf("json.Number %q is not a JSON number", string(x))
		}
		return ""
	case []any:
		if x == nil {
			return "nil []any is not a value (encoding/json writes null); use []any{}"
		}
		for i, e := range x {
			if r := checkValue(e); r != "" {
				return fmt.Sprintf("[%d]: %s", i, r)
			}
		}
		return ""
	case map[string]any:
		if x == nil {
			return "nil map[string]any is not a value (encoding/json writes null); use map[string]any{}"
		}
		bad := false
		for k, e := range x {
			if !utf8.ValidString(k) || checkValue(e) != "" {
				bad = true
				break
			}
		}
		if !bad {
			return ""
		}
		// Name the first bad key in sorted order, so the message is stable.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if !utf8.ValidString(k) {
				return fmt.Sprintf("key %q is not valid UTF-8", k)
			}
			if r := checkValue(x[k]); r != "" {
				return fmt.Sprintf("[%q]: %s", k, r)
			}
		}
		return ""
	default:
		return fmt.Sprintf("%T is not a value (numbers are json.Number, objects map[string]any, arrays []any)", v)
	}
}

// validNumber reports whether s is a JSON number, exactly as the grammar
// spells it (no sign but '-', no leading zeros, no surrounding space).
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// kindOf names a value's JSON type for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// aKind names a value's JSON type with its article, for messages.
func aKind(v any) string {
	switch k := kindOf(v); k {
	case "null":
		return k
	case "object", "array":
		return "an " + k
	default:
		return "a " + k
	}
}

// Clone returns a copy of the value v whose objects and arrays are its
// own, for Apply to change while v stays as it is; scalars are immutable
// and shared. A value parsed once and cloned for each use costs a fraction
// of parsing it each time.
func Clone(v any) any { return cloneValue(v) }

// cloneValue copies every container of v; scalars are immutable and shared.
func cloneValue(v any) any {
	switch x := v.(type) {
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = cloneValue(e)
		}
		return c
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = cloneValue(e)
		}
		return c
	default:
		return v
	}
}

// equalValue reports whether a and b are the same JSON value.
func equalValue(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if mapPtr(x) == mapPtr(y) {
			return true
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalValue(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if slicePtr(x) == slicePtr(y) {
			return true
		}
		for i := range x {
			if !equalValue(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		// a is a scalar, so comparing the interfaces cannot panic: if b
		// holds a container its dynamic type differs from a's.
		return a == b
	}
}

// sameRef reports whether a and b are the same container (the same map, or
// slices over the same elements), or equal scalars.
func sameRef(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && mapPtr(x) == mapPtr(y)
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && slicePtr(x) == slicePtr(y)
	default:
		return a == b
	}
}

// mapPtr is a map's identity.
func mapPtr(m map[string]any) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// slicePtr is a non-empty slice's identity: its first element. Empty slices
// have none, so nothing ever treats one as owned or as an origin.
func slicePtr(s []any) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s))
}

// containerPtr is the identity of a non-empty container, or nil.
func containerPtr(v any) unsafe.Pointer {
	switch x := v.(type) {
	case map[string]any:
		return mapPtr(x)
	case []any:
		return slicePtr(x)
	default:
		return nil
	}
}

// utf16Len is the length of s in UTF-16 code units. A rune outside the Basic
// Multilingual Plane, which UTF-16 writes as a surrogate pair, takes four
// bytes in UTF-8 and no other rune does, so count those lead bytes twice.
func utf16Len(s string) int {
	n := utf8.RuneCountInString(s)
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xF0 {
			n++
		}
	}
	return n
}

// dropUTF16 drops the first n UTF-16 code units of s. It fails when n is
// past the end or would split a surrogate pair, which a Go string cannot
// hold half of.
func dropUTF16(s string, n int) (string, *OpError) {
	units := 0
	for i, r := range s {
		if units == n {
			return s[i:], nil
		}
		units += utf16.RuneLen(r)
		if units > n {
			return "", fault(ErrRange, "dropping %d UTF-16 code units would split a surrogate pair", n)
		}
	}
	if units == n {
		return "", nil
	}
	return "", fault(ErrRange, "cannot drop %d UTF-16 code units from a string of %d", n, units)
}
