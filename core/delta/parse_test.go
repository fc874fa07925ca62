package delta_test

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core/delta"
)

// decodeLikeEncodingJSON is what ParseValue must agree with: encoding/json
// decoding one value into an any with UseNumber, nothing but space after.
func decodeLikeEncodingJSON(data []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// sameAsEncodingJSON fails t when ParseValue and encoding/json disagree on
// data: one refuses what the other takes, or they decode different values.
func sameAsEncodingJSON(t interface {
	Helper()
	Fatalf(string, ...any)
}, data []byte) {
	t.Helper()
	want, ok := decodeLikeEncodingJSON(data)
	got, err := delta.ParseValue(data)
	switch {
	case ok && err != nil:
		t.Fatalf("ParseValue(%q) = %v; encoding/json decodes %#v", data, err, want)
	case !ok && err == nil:
		t.Fatalf("ParseValue(%q) = %#v; encoding/json refuses it", data, got)
	case ok && !reflect.DeepEqual(want, got): // cmp.Diff only then: it is slow on deep nesting
		t.Fatalf("ParseValue(%q) differs from encoding/json (-want +got):\n%s", data, cmp.Diff(want, got))
	}
}

// parseCases are the corners where a hand-written decoder could part from
// encoding/json: numbers at the edge of the grammar, escapes, surrogate
// halves and pairs, bytes that are not UTF-8, keys given twice, space,
// trailing data, truncation and nesting at the depth limit.
var parseCases = []string{
	``, ` `, `1`, `-0`, `-`, `01`, `1.`, `.5`, `1.5e`, `1e+5`, `1E-07`, `-12.50e3`, `0x1`, `+1`, `1_000`,
	`true`, `false`, `null`, `nul`, `truex`, `t`, `nulll`,
	`""`, `"abc"`, `"a\tb"`, "\"a\tb\"", "\"a\x01b\"", "\"\x7f\"", `"\/\"\\\b\f\n\r\t"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\u00e9\u00E9"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\ud83dx"`, `"\ud83d\ud83d\ude00"`, `"\ud83d\uzzzz"`, `"\ud83d\`,
	"\"\xff\"", "\"a\xc0\xafb\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", "\"é😀\"", "\"\xef\xbf\xbd\"", "\"\\n\xff\"",
	`[]`, `{}`, `[ ]`, `{ }`, `[1,]`, `[,1]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1,"a":2}`, `{"a":{"b":[1,{"c":null}]},"a":[]}`,
	` {"k" : [ true , false , null , -1.5e-3 , "s" ] } `, "\t\n\r[1]\r\n", `[1] x`, `1 2`, `{} {}`, `"abc`, `[1`, `{"a":`, `{"a"`, `[`, `{`,
	"\ufeff1", `"\u0000"`, `{"":""}`, `{"\u00e9":1,"é":2}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestParseValueDecodesWhatEncodingJSONDecodes(t *testing.T) {
	for _, c := range parseCases {
		sameAsEncodingJSON(t, []byte(c))
	}
}

func TestParseValueErrorsSayWhatAndWhere(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":tru}`, `delta: value is not JSON: invalid character '}' at offset 8 (want the literal true)`},
		{`[1,2`, `delta: value is not JSON: unexpected end of JSON input (want a comma or the end of an array)`},
		{`"\q"`, `delta: value is not JSON: invalid character 'q' at offset 2 (want an escape character)`},
		{`[1] 2`, `delta: value is followed by more data`},
	} {
		_, err := delta.ParseValue([]byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseValue(%q) = %v; want %q", c.in, err, c.want)
		}
	}
}

// parseTokens are pieces of JSON texts, valid and not, that rapid strings
// together: every rule of the grammar meets every other.
var parseTokens = []string{
	"{", "}", "[", "]", ",", ":", " ", "\n", `"`, `"k"`, `"v"`, `"\u00e9"`, `"\ud83d`, `\ude00"`, `\"`, `\\`, `\u`, "0", "-", "1", "23",
	".", "5", "e", "E", "+", "true", "false", "null", "tr", "\xff", "é", "😀", "\x01", `"a\nb"`, `"é\t"`,
}

func TestParseValueAgreesWithEncodingJSONOnAnyText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		for range rapid.IntRange(0, 24).Draw(t, "tokens") {
			b.WriteString(pick(t, "token", parseTokens))
		}
		sameAsEncodingJSON(t, []byte(b.String()))
	})
}

// Every value encoding/json writes, ParseValue reads back as encoding/json
// would.
func TestParseValueAgreesWithEncodingJSONOnEncodedValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw, err := json.Marshal(genValue(t, 3))
		if err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, raw)
	})
}

func FuzzParseValue(f *testing.F) {
	for _, c := range parseCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsEncodingJSON(t, data)
	})
}
