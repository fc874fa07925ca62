package jsonvalue_test

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// decodeLikeEncodingJSON is what Parse must agree with: encoding/json
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

// sameAsEncodingJSON fails t when Parse or Valid and encoding/json
// disagree on data: one refuses what the other takes, or Parse decodes
// another value.
func sameAsEncodingJSON(t interface {
	Helper()
	Fatalf(string, ...any)
}, data []byte) {
	t.Helper()
	if got, want := jsonvalue.Valid(data), json.Valid(data); got != want {
		t.Fatalf("Valid(%q) = %t; json.Valid says %t", data, got, want)
	}
	want, ok := decodeLikeEncodingJSON(data)
	got, err := jsonvalue.Parse(data)
	switch {
	case ok && err != nil:
		t.Fatalf("Parse(%q) = %v; encoding/json decodes %#v", data, err, want)
	case !ok && err == nil:
		t.Fatalf("Parse(%q) = %#v; encoding/json refuses it", data, got)
	case ok && !reflect.DeepEqual(want, got): // cmp.Diff only then: it is slow on deep nesting
		t.Fatalf("Parse(%q) differs from encoding/json (-want +got):\n%s", data, cmp.Diff(want, got))
	}
}

// parseCases are the corners where a hand-written decoder could part from
// encoding/json (the fuzz target's seeds): numbers at the edge of the grammar, escapes, surrogate
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

func TestParseAndValidAgreeWithEncodingJSONOnEveryCorner(t *testing.T) {
	for _, c := range parseCases {
		sameAsEncodingJSON(t, []byte(c))
	}
}

func TestParseErrorsSayWhatAndWhere(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":tru}`, `invalid character '}' at offset 8 (want the literal true)`},
		{`[1,2`, `unexpected end of JSON input (want a comma or the end of an array)`},
		{`"\q"`, `invalid character 'q' at offset 2 (want an escape character)`},
		{`[1] 2`, jsonvalue.ErrTrailing.Error()},
	} {
		_, err := jsonvalue.Parse([]byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v; want %q", c.in, err, c.want)
		}
	}
}

// parseTokens are pieces of JSON texts, valid and not, that rapid strings
// together: every rule of the grammar meets every other.
var parseTokens = []string{
	"{", "}", "[", "]", ",", ":", " ", "\n", `"`, `"k"`, `"v"`, `"\u00e9"`, `"\ud83d`, `\ude00"`, `\"`, `\\`, `\u`, "0", "-", "1", "23",
	".", "5", "e", "E", "+", "true", "false", "null", "tr", "\xff", "é", "😀", "\x01", `"a\nb"`, `"é\t"`,
}

func TestParseAndValidAgreeWithEncodingJSONOnAnyText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		for range rapid.IntRange(0, 24).Draw(t, "tokens") {
			b.WriteString(rapid.SampledFrom(parseTokens).Draw(t, "token"))
		}
		sameAsEncodingJSON(t, []byte(b.String()))
	})
}

// Every value encoding/json writes, Parse reads back as encoding/json
// would, and Valid takes.
func TestParseAndValidAgreeWithEncodingJSONOnEncodedValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw, err := json.Marshal(genValue(t, 3))
		if err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, raw)
	})
}

// genValue draws a JSON value at most depth containers deep, with strings
// that need escapes and runes outside the BMP.
func genValue(t *rapid.T, depth int) any {
	kinds := 5
	if depth > 0 {
		kinds = 7
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.Float64().Draw(t, "number")
	case 3:
		return rapid.Int64().Draw(t, "int")
	case 4:
		return rapid.SampledFrom([]string{"", "x", "é😀", "tab\there", "quote\"", "back\\slash", "\u2028", "\x00\x1f", "<&>"}).Draw(t, "string")
	case 5:
		var a []any
		for range rapid.IntRange(0, 4).Draw(t, "len") {
			a = append(a, genValue(t, depth-1))
		}
		return a
	}
	m := map[string]any{}
	for range rapid.IntRange(0, 4).Draw(t, "len") {
		m[rapid.SampledFrom([]string{"a", "b", "é", "😀", ""}).Draw(t, "key")] = genValue(t, depth-1)
	}
	return m
}

func FuzzJSONValue(f *testing.F) {
	for _, c := range parseCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsEncodingJSON(t, data)
	})
}

// BenchmarkParse decodes a streamed assistant message's preview (a text
// block and a tool call with arguments, usage numbers, an escaped string)
// with Parse and, for the ratio, with encoding/json as delta.ParseValue did
// before; BenchmarkValid checks it, against json.Valid.
func BenchmarkParse(b *testing.B) {
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonvalue.Parse(benchMessage); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeLikeEncodingJSON(benchMessage); !ok {
				b.Fatal("refused")
			}
		}
	})
}

func BenchmarkValid(b *testing.B) {
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !jsonvalue.Valid(benchMessage) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(benchMessage) {
				b.Fatal("refused")
			}
		}
	})
}

var benchMessage = []byte(`{"role":"assistant","content":[{"type":"text","text":"Here is the plan:\n1. read \"main.go\"\n2. run the tests"},` +
	`{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"go test ./...","timeoutMs":120000}}],` +
	`"api":"faux","provider":"faux","model":"faux-1","usage":{"input":10000,"output":42,"cacheRead":0,"cacheWrite":0,"totalTokens":10042,` +
	`"cost":{"input":0.03,"output":0.0063,"cacheRead":0,"cacheWrite":0,"total":0.0363}},"stopReason":"toolUse","timestamp":1796183294639}`)
