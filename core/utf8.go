package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
)

// RuleInvalidUTF8 is the rule a commit breaks with text that is not valid
// UTF-8. The backends cannot agree on such bytes (memory would keep them,
// JSON turns them into U+FFFD), so the line refuses them everywhere.
const RuleInvalidUTF8 Rule = "invalid-utf-8"

// replacementEscape is what encoding/json writes for invalid UTF-8 in a
// string, and so the cheap sign that a marshalled payload may have had
// some (a real U+FFFD is written as its UTF-8 bytes).
var replacementEscape = []byte(`\ufffd`)

// checkUTF8 walks a Go value and names the first string (or raw JSON) that
// is not valid UTF-8, by its path under path; "" when all are valid.
// Struct fields that cannot hold text (numbers, booleans) are skipped by a
// per-type plan, and the path is only built for a failure.
func checkUTF8(v reflect.Value, path string) string {
	if at, bad := badUTF8(v); bad {
		return path + at
	}
	return ""
}

func badUTF8(v reflect.Value) (at string, bad bool) {
	switch v.Kind() {
	case reflect.String:
		return "", !utf8.ValidString(v.String())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // raw JSON, bytes
			return "", v.Type() == rawMessageType && !utf8.Valid(v.Bytes())
		}
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			if at, bad := badUTF8(v.Index(i)); bad {
				return "[" + strconv.Itoa(i) + "]" + at, true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if _, bad := badUTF8(it.Key()); bad {
				return "{key}", true
			}
			if at, bad := badUTF8(it.Value()); bad {
				return "." + fmt.Sprint(it.Key().Interface()) + at, true
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return badUTF8(v.Elem())
		}
	case reflect.Struct:
		for _, i := range textFields(v.Type()) {
			if at, bad := badUTF8(v.Field(i)); bad {
				return "." + v.Type().Field(i).Name + at, true
			}
		}
	}
	return "", false
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// textFieldsByType caches, per struct type, its exported fields that can
// hold text.
var textFieldsByType sync.Map // reflect.Type → []int

func textFields(t reflect.Type) []int {
	if f, ok := textFieldsByType.Load(t); ok {
		return f.([]int)
	}
	var out []int
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && mayHoldText(f.Type, map[reflect.Type]bool{}) {
			out = append(out, i)
		}
	}
	textFieldsByType.Store(t, out)
	return out
}

// mayHoldText reports whether a value of type t can contain a string.
func mayHoldText(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // a recursive type is judged where it started
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		return true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return t == rawMessageType
		}
		return mayHoldText(t.Elem(), seen)
	case reflect.Array, reflect.Pointer:
		return mayHoldText(t.Elem(), seen)
	case reflect.Map:
		return mayHoldText(t.Key(), seen) || mayHoldText(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && mayHoldText(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// invalidUTF8 reports where v holds invalid UTF-8, for a rejection.
func invalidUTF8(what string, v any) *CommitError {
	if p := checkUTF8(reflect.ValueOf(v), what); p != "" {
		return Rejectf(RuleInvalidUTF8, 0, "%s is not valid UTF-8", p)
	}
	return nil
}

// marshalledUTF8 checks a payload Marshal encoded: encoding/json replaced
// any invalid UTF-8 with an escaped U+FFFD, so only an output holding one
// needs the walk of its input.
// Raw JSON inside the value is copied as it is, so the output itself must
// be valid UTF-8 too.
func marshalledUTF8(v any, raw []byte) *CommitError {
	if utf8.Valid(raw) && !bytes.Contains(raw, replacementEscape) {
		return nil
	}
	if ce := invalidUTF8("payload", v); ce != nil {
		return ce
	}
	if !utf8.Valid(raw) {
		return Rejectf(RuleInvalidUTF8, 0, "payload is not valid UTF-8")
	}
	return nil
}
