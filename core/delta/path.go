package delta

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PathSegmentsMax bounds a path's length. Previews are shallow (the
// reference's example path has five segments); the bound keeps a hostile op
// from making the applier walk or allocate without limit, and Diff sets a
// whole subtree rather than reach below it.
const PathSegmentsMax = 64

// Path addresses a place in a value: each segment is a string (an object key)
// or an int ≥ 0 (an array index). Path{} is the root.
type Path []any

// reservedSegment reports whether a key may not appear in a path (§1.1).
// They are harmless in Go, but a JavaScript replica that assigns through
// them pollutes its prototypes, so no producer may emit them.
func reservedSegment(key string) bool {
	return key == "__proto__" || key == "constructor" || key == "prototype"
}

// String is the path's JSON form.
func (p Path) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, seg := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		switch s := seg.(type) {
		case string:
			q, _ := json.Marshal(s)
			b.Write(q)
		case int:
			b.WriteString(strconv.Itoa(s))
		default:
			b.WriteString("?")
		}
	}
	b.WriteByte(']')
	return b.String()
}

// checkPath returns why p is not a path, or nil.
func checkPath(p Path) *OpError {
	if len(p) > PathSegmentsMax {
		return fault(ErrMalformed, "path has %d segments; at most %d", len(p), PathSegmentsMax)
	}
	for i, seg := range p {
		switch s := seg.(type) {
		case string:
			if reservedSegment(s) {
				return fault(ErrMalformed, "path segment %d is the reserved key %q", i, s)
			}
			if !utf8.ValidString(s) {
				return fault(ErrMalformed, "path segment %d is not valid UTF-8", i)
			}
		case int:
			if s < 0 {
				return fault(ErrMalformed, "path segment %d is the negative index %d", i, s)
			}
		default:
			return fault(ErrMalformed, "path segment %d is a %T; want string or int", i, seg)
		}
	}
	return nil
}

// clonePath copies p; the copy is never nil, so a root path stays Path{}.
func clonePath(p Path) Path {
	return append(Path{}, p...)
}

// pathOf reads a decoded JSON array as a path.
func pathOf(x any) (Path, *OpError) {
	arr, ok := x.([]any)
	if !ok {
		return nil, fault(ErrMalformed, "path is %s; want an array", aKind(x))
	}
	p := make(Path, len(arr))
	for i, e := range arr {
		switch s := e.(type) {
		case string:
			p[i] = s
		case json.Number:
			n, ok := intOf(s)
			if !ok {
				return nil, fault(ErrMalformed, "path segment %d is %s; want a string or an integer index", i, s)
			}
			p[i] = n
		default:
			return nil, fault(ErrMalformed, "path segment %d is %s; want string or integer", i, aKind(e))
		}
	}
	if f := checkPath(p); f != nil {
		return nil, f
	}
	return p, nil
}

// intOf reads an integer in any JSON spelling a JavaScript producer may use
// ("7", "7.0", "1e9"), within the range a JavaScript number holds exactly.
func intOf(n json.Number) (int, bool) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return int(i), true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}
