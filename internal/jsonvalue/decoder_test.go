package jsonvalue_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// probe is a struct with a field of every kind the Decoder reads.
type probe struct {
	S string          `json:"s"`
	N int64           `json:"n"`
	F float64         `json:"f"`
	B bool            `json:"b"`
	R json.RawMessage `json:"r"`
	A []int64         `json:"a"`
	O *probe          `json:"o"`
}

// decodeProbe is a hand-written decoder of a probe as the Decoder's users
// write one: every field at most once, null only where it sets nothing
// else than encoding/json does. A strict decoder gives up on a key it
// does not know (encoding/json with DisallowUnknownFields refuses it); a
// lenient one skips it unless the key is one of its own in another case.
func decodeProbe(d *jsonvalue.Decoder, lenient bool) (p probe, ok bool) {
	var seen [7]bool
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	ok = d.Object(func(key []byte) bool {
		switch string(key) {
		case "s":
			p.S, ok = d.String()
			return once(0) && ok
		case "n":
			p.N, ok = d.Int64()
			return once(1) && ok
		case "f":
			p.F, ok = d.Float64()
			return once(2) && ok
		case "b":
			p.B, ok = d.Bool()
			return once(3) && ok
		case "r":
			p.R, ok = d.Raw()
			return once(4) && ok
		case "a":
			p.A = []int64{}
			return once(5) && d.Array(func() bool {
				n, ok := d.Int64()
				p.A = append(p.A, n)
				return ok
			})
		case "o":
			if !once(6) {
				return false
			}
			if d.Null() {
				return true
			}
			o, ok := decodeProbe(d, lenient)
			p.O = &o
			return ok
		}
		return lenient && !jsonvalue.FoldsTo(key, "s", "n", "f", "b", "r", "a", "o") && d.Skip()
	})
	return p, ok
}

// sameProbeAsEncodingJSON fails t when the hand decoder takes data and
// encoding/json (strict, as the JSONL reader is) refuses it or decodes
// another probe. The hand decoder may give up where encoding/json takes
// the text: its caller then asks encoding/json.
//
// It checks both a strict and a lenient decoder, and reports whether the
// strict one took data.
func sameProbeAsEncodingJSON(t interface {
	Helper()
	Fatalf(string, ...any)
}, data []byte) bool {
	t.Helper()
	for _, lenient := range []bool{true, false} {
		d := jsonvalue.NewDecoder(data)
		got, ok := decodeProbe(d, lenient)
		if !ok || !d.End() {
			if !lenient {
				return false
			}
			continue
		}
		var want probe
		dec := json.NewDecoder(bytes.NewReader(data))
		if !lenient {
			dec.DisallowUnknownFields()
		}
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("the Decoder (lenient %t) took %q; encoding/json refuses it: %v", lenient, data, err)
		}
		if dec.More() {
			t.Fatalf("the Decoder (lenient %t) took %q; encoding/json finds more after it", lenient, data)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("the Decoder (lenient %t) read %q otherwise than encoding/json (-want +got):\n%s", lenient, data, diff)
		}
	}
	return true
}

// probeValues are values for a probe's fields, each right for some field
// and wrong for the others.
var probeValues = []string{
	`""`, `"abc"`, `"\u00e9\ud83d\ude00"`, `"\ud83d"`, "\"\xff\"", `"a\nb"`, `"\x"`, "\"\x01\"", `"<&>\u2028"`,
	`0`, `-0`, `1`, `-12`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `1.5`, `1e3`, `1E-2`, `01`, `-`,
	`1e400`, `-1e400`, `4.9e-324`, `1e-400`, `0.1`,
	`true`, `false`, `null`, `nul`, `tru`, `n"x"`, `nul1`, `nutrue`, `n[]`, `n{}`, `nnull`, `nullx`,
	`[]`, `[1,2]`, `[1,]`, `[1.5]`, `["a"]`, `[null]`, `{}`, `{"s":"x"}`, `{"s":"x","s":"y"}`, `{"S":"x"}`, `{"zz":1}`, `{"n":1,"o":{"n":2}}`,
	`{"r":[1, {"a" : 2}]}`, `[` + strings.Repeat(`[`, 20) + strings.Repeat(`]`, 20) + `]`,
}

// Every field with every value, and the object's own corners: whatever the
// hand decoder takes, encoding/json takes and reads the same.
func TestDecoderAgreesWithEncodingJSON(t *testing.T) {
	took := 0
	for _, key := range []string{"s", "n", "f", "b", "r", "a", "o", "S", "\\u0073", "x", "\u017f", "\x01", "\xff", "é"} {
		for _, v := range probeValues {
			for _, form := range []string{`{"%k":%v}`, ` { "%k" : %v } `, `{"%k":%v,"%k":%v}`, `{"%k":%v}x`, `{"%k":%v`, `{"%k":%v,}`, `[{"%k":%v}]`} {
				text := strings.NewReplacer("%k", key, "%v", v).Replace(form)
				if sameProbeAsEncodingJSON(t, []byte(text)) {
					took++
				}
			}
		}
	}
	// The fast path must be taken for ordinary texts, or it is no path.
	if took < 100 {
		t.Fatalf("the Decoder took only %d of the texts", took)
	}
	for _, text := range []string{`{}`, `{"s":"x","n":1,"f":1.5,"b":true,"r":null,"a":[],"o":null}`, `{"o":{"o":{"a":[1,2,3]}}}`} {
		if !sameProbeAsEncodingJSON(t, []byte(text)) {
			t.Errorf("the Decoder gave up on %s", text)
		}
	}
}

// probeTokens are pieces of probe texts, valid and not, for rapid to
// string together.
var probeTokens = []string{
	"{", "}", "[", "]", ",", ":", " ", `"s"`, `"n"`, `"f"`, `"b"`, `"r"`, `"a"`, `"o"`, `"x"`, `"é"`, `"S"`, "\"\x01\"", `"ſ"`,
	"0", "-", "1", "2.5", "e9", "true", "false", "null", "n", "nu", "nul", `"v"`, `"\ud83d"`, "\xff",
}

func TestDecoderAgreesWithEncodingJSONOnAnyText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		for range rapid.IntRange(0, 30).Draw(t, "tokens") {
			b.WriteString(rapid.SampledFrom(probeTokens).Draw(t, "token"))
		}
		sameProbeAsEncodingJSON(t, []byte(b.String()))
	})
}

// What encoding/json writes of a probe, the hand decoder reads, as
// encoding/json reads it.
func TestDecoderReadsWhatEncodingJSONWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProbe(t, 2)
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !sameProbeAsEncodingJSON(t, raw) {
			t.Fatalf("the Decoder gave up on %s", raw)
		}
	})
}

func genProbe(t *rapid.T, depth int) probe {
	p := probe{
		S: rapid.SampledFrom([]string{"", "x", "é😀", "tab\there", "quote\"", "\u2028", "\x00\x1f", "<&>", "\xff"}).Draw(t, "s"),
		N: rapid.Int64().Draw(t, "n"),
		F: rapid.Float64().Draw(t, "f"),
		B: rapid.Bool().Draw(t, "b"),
	}
	if raw, err := json.Marshal(genValue(t, 2)); err == nil && rapid.Bool().Draw(t, "r") {
		p.R = raw
	}
	p.A = rapid.SliceOfN(rapid.Int64(), 0, 4).Draw(t, "a")
	if depth > 0 && rapid.Bool().Draw(t, "o") {
		o := genProbe(t, depth-1)
		p.O = &o
	}
	return p
}

func FuzzDecoder(f *testing.F) {
	for _, v := range probeValues {
		f.Add([]byte(`{"s":"x","n":1,"r":` + v + `}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameProbeAsEncodingJSON(t, data)
	})
}
