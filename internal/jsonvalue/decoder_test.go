package jsonvalue_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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

var (
	probeNames        = []string{"s", "n", "f", "b", "r", "a", "o"}
	probeKnownFields  = jsonvalue.KnownFields(probeNames...)
	probeSomeFields   = jsonvalue.SomeFields(probeNames...)
	probeFieldsByMode = map[bool]*jsonvalue.Fields{false: probeKnownFields, true: probeSomeFields}
)

// decodeProbeByFields is decodeProbe written on Members and the Into
// functions, where a null leaves a field as it is.
func decodeProbeByFields(d *jsonvalue.Decoder, lenient bool) (p probe, ok bool) {
	ok = d.Members(probeFieldsByMode[lenient], func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.StringInto(d, &p.S)
		case 1:
			return jsonvalue.Int64Into(d, &p.N)
		case 2:
			return jsonvalue.Float64Into(d, &p.F)
		case 3:
			return jsonvalue.BoolInto(d, &p.B)
		case 4:
			return jsonvalue.RawInto(d, &p.R)
		case 5:
			return jsonvalue.SliceInto(d, &p.A, func(n *int64) bool { return jsonvalue.Int64Into(d, n) })
		}
		return jsonvalue.PointerInto(d, &p.O, func(o *probe) bool {
			var ok bool
			*o, ok = decodeProbeByFields(d, lenient)
			return ok
		})
	})
	return p, ok
}

var probeDecoders = []struct {
	name   string
	decode func(*jsonvalue.Decoder, bool) (probe, bool)
}{
	{"by methods", decodeProbe},
	{"by fields", decodeProbeByFields},
}

// sameProbeAsEncodingJSON fails t when the hand decoder takes data and
// encoding/json (strict, as the JSONL reader is) refuses it or decodes
// another probe. The hand decoder may give up where encoding/json takes
// the text: its caller then asks encoding/json.
//
// It checks a strict and a lenient decoder of each of probeDecoders, and
// reports whether a strict one took data.
func sameProbeAsEncodingJSON(t interface {
	Helper()
	Fatalf(string, ...any)
}, data []byte) (took bool) {
	t.Helper()
	for _, pd := range probeDecoders {
		for _, lenient := range []bool{true, false} {
			if sameProbe(t, pd.name, pd.decode, data, lenient) && !lenient {
				took = true
			}
		}
	}
	return took
}

// sameProbe is sameProbeAsEncodingJSON for one decoder, and reports
// whether it took data.
func sameProbe(t interface {
	Helper()
	Fatalf(string, ...any)
}, name string, decode func(*jsonvalue.Decoder, bool) (probe, bool), data []byte, lenient bool) bool {
	t.Helper()
	d := jsonvalue.NewDecoder(data)
	got, ok := decode(d, lenient)
	if !ok || !d.End() {
		return false
	}
	var want probe
	dec := json.NewDecoder(bytes.NewReader(data))
	if !lenient {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("the Decoder %s (lenient %t) took %q; encoding/json refuses it: %v", name, lenient, data, err)
	}
	if dec.More() {
		t.Fatalf("the Decoder %s (lenient %t) took %q; encoding/json finds more after it", name, lenient, data)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the Decoder %s (lenient %t) read %q otherwise than encoding/json (-want +got):\n%s", name, lenient, data, diff)
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
		for _, pd := range probeDecoders {
			if !sameProbe(t, pd.name, pd.decode, []byte(text), false) {
				t.Errorf("the Decoder %s gave up on %s", pd.name, text)
			}
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

// Members gives up where setting as it reads would differ from
// encoding/json: a key given twice (encoding/json merges a second object
// into the first), a key matching a field only without regard to case,
// and, for KnownFields, any other key; SomeFields skips other keys.
func TestMembersGivesUpWhereEncodingJSONWouldDiffer(t *testing.T) {
	for _, c := range []struct {
		text         string
		known, other bool // taken by KnownFields, by SomeFields
	}{
		{`{"s":"x","n":1}`, true, true},
		{`{"s":"x","zz":[1,{"a":2}]}`, false, true},
		{`{"o":{"n":1},"o":{"s":"x"}}`, false, false},
		{`{"s":"x","s":"y"}`, false, false},
		{`{"S":"x"}`, false, false},
		{`{"ſ":"x"}`, false, false},
		{`{"s":null,"a":null,"o":null}`, true, true},
	} {
		for _, lenient := range []bool{false, true} {
			want := c.known
			if lenient {
				want = c.other
			}
			d := jsonvalue.NewDecoder([]byte(c.text))
			_, got := decodeProbeByFields(d, lenient)
			if got != want {
				t.Errorf("%s (lenient %t): taken %t, want %t", c.text, lenient, got, want)
			}
			sameProbe(t, "by fields", decodeProbeByFields, []byte(c.text), lenient)
		}
	}
}

// A null sets a slice or a pointer to nil, as encoding/json does, where an
// empty array gives an empty slice.
func TestSliceIntoTellsNullFromEmpty(t *testing.T) {
	p := new(int64)
	d := jsonvalue.NewDecoder([]byte(`null`))
	if !jsonvalue.PointerInto(d, &p, func(n *int64) bool { return jsonvalue.Int64Into(d, n) }) || p != nil {
		t.Errorf("PointerInto of null left %v; want nil", p)
	}
	for text, wantNil := range map[string]bool{`null`: true, `[]`: false} {
		v := []int64{7}
		d := jsonvalue.NewDecoder([]byte(text))
		if !jsonvalue.SliceInto(d, &v, func(n *int64) bool { return jsonvalue.Int64Into(d, n) }) || !d.End() {
			t.Fatalf("SliceInto gave up on %s", text)
		}
		if (v == nil) != wantNil {
			t.Errorf("SliceInto of %s: nil %t, want %t", text, v == nil, wantNil)
		}
	}
}

func TestFieldsRefuseMoreNamesThanTheyTrack(t *testing.T) {
	names := make([]string, 65)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "65 field names") {
			t.Fatalf("KnownFields of 65 names: recovered %v, want a panic naming the count", r)
		}
	}()
	jsonvalue.KnownFields(names...)
}

// Each Into function takes null and its own kind, and reports false on
// a value of another kind, as do PointerInto and SliceInto when their
// read does.
func TestIntoFunctionsReportAValueOfAnotherKind(t *testing.T) {
	texts := []string{`"x"`, `-2`, `1.5`, `true`, `["v"]`, `{}`, `null`}
	for _, c := range []struct {
		name  string
		takes []string // besides null
		read  func(d *jsonvalue.Decoder) bool
	}{
		{"StringInto", []string{`"x"`}, func(d *jsonvalue.Decoder) bool { var s string; return jsonvalue.StringInto(d, &s) }},
		{"Int64Into", []string{`-2`}, func(d *jsonvalue.Decoder) bool { var n int64; return jsonvalue.Int64Into(d, &n) }},
		{"Float64Into", []string{`-2`, `1.5`}, func(d *jsonvalue.Decoder) bool { var f float64; return jsonvalue.Float64Into(d, &f) }},
		{"BoolInto", []string{`true`}, func(d *jsonvalue.Decoder) bool { var b bool; return jsonvalue.BoolInto(d, &b) }},
		{"RawInto", texts, func(d *jsonvalue.Decoder) bool { var r []byte; return jsonvalue.RawInto(d, &r) }},
		{"PointerInto", []string{`-2`}, func(d *jsonvalue.Decoder) bool {
			var p *int64
			return jsonvalue.PointerInto(d, &p, func(n *int64) bool { return jsonvalue.Int64Into(d, n) })
		}},
		{"SliceInto", []string{`["v"]`}, func(d *jsonvalue.Decoder) bool {
			var v []string
			return jsonvalue.SliceInto(d, &v, func(s *string) bool { return jsonvalue.StringInto(d, s) })
		}},
	} {
		for _, text := range texts {
			want := text == "null" || slices.Contains(c.takes, text)
			d := jsonvalue.NewDecoder([]byte(text))
			got := c.read(d)
			if want { // and read it all
				got = got && d.End()
			}
			if got != want {
				t.Errorf("%s on %s: %t, want %t", c.name, text, got, want)
			}
		}
	}
}

// Reading a number into an int64 or a float64 reads its text in place:
// nothing is allocated for it (a replay reads hundreds of thousands).
func TestNumbersAreReadWithoutAllocating(t *testing.T) {
	text := []byte(`[123456789,-0.25e3]`)
	allocs := testing.AllocsPerRun(100, func() {
		d := jsonvalue.NewDecoder(text)
		var n int64
		var f float64
		i := 0
		ok := d.Array(func() bool {
			i++
			if i == 1 {
				return jsonvalue.Int64Into(d, &n)
			}
			return jsonvalue.Float64Into(d, &f)
		})
		if !ok || n != 123456789 || f != -250 {
			t.Fatalf("read %d, %g (%v); want 123456789, -250", n, f, ok)
		}
	})
	if allocs > 1 { // the decoder itself
		t.Fatalf("reading two numbers allocated %.0f times; want at most the decoder's one", allocs)
	}
}
