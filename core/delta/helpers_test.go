package delta_test

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core/delta"
)

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// val parses a JSON value, or fails the test.
func val(t tb, s string) any {
	t.Helper()
	v, err := delta.ParseValue([]byte(s))
	if err != nil {
		t.Fatalf("ParseValue(%s): %v", s, err)
	}
	return v
}

// opsOf parses a JSON batch, or fails the test.
func opsOf(t tb, s string) []delta.Op {
	t.Helper()
	ops, err := delta.ParseOps([]byte(s))
	if err != nil {
		t.Fatalf("ParseOps(%s): %v", s, err)
	}
	return ops
}

// jsonOf is v's JSON (maps with sorted keys), or fails the test.
func jsonOf(t tb, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

// deepCopy copies a value through its JSON, sharing nothing with it.
func deepCopy(t tb, v any) any {
	t.Helper()
	return val(t, jsonOf(t, v))
}

// compact rewrites a JSON text without insignificant space.
func compact(t *testing.T, s string) string {
	t.Helper()
	return jsonOf(t, val(t, s))
}
