package core

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core/ai"
)

// sameSystemDataAsEncodingJSON fails t when decodeSystemData takes data
// and encoding/json refuses it or reads it otherwise; it reports whether
// the fast path took it.
func sameSystemDataAsEncodingJSON(t interface {
	Helper()
	Fatalf(string, ...any)
}, data []byte) bool {
	t.Helper()
	got, ok := decodeSystemData(data)
	if !ok {
		return false
	}
	var want SystemData
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("the fast path took %q; encoding/json refuses it: %v", data, err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("the fast path read %q otherwise than encoding/json (-want +got):\n%s", data, cmp.Diff(want, got))
	}
	return true
}

var genSystemString = rapid.SampledFrom([]string{"", "a", "é😀", "quote\"", "<&>\u2028", "\x00", "\xff"})

func genSystemData(t *rapid.T) SystemData {
	d := SystemData{Baseline: rapid.Bool().Draw(t, "baseline")}
	for range rapid.IntRange(0, 3).Draw(t, "sections") {
		s := SystemSection{Key: genSystemString.Draw(t, "key")}
		if rapid.Bool().Draw(t, "text") {
			text := genSystemString.Draw(t, "text")
			s.Text = &text
		}
		d.Sections = append(d.Sections, s)
	}
	tool := func() ai.Tool {
		tl := ai.Tool{Name: genSystemString.Draw(t, "name"), Description: genSystemString.Draw(t, "desc"),
			Parameters: json.RawMessage(rapid.SampledFrom([]string{`{}`, `{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`, `null`, `[1,{"a":"<"}]`}).Draw(t, "params"))}
		if rapid.Bool().Draw(t, "constrained") {
			tl.ConstrainedSampling = json.RawMessage(`{"k":true}`)
		}
		return tl
	}
	for range rapid.IntRange(0, 3).Draw(t, "added") {
		d.ToolsAdded = append(d.ToolsAdded, tool())
	}
	for range rapid.IntRange(0, 2).Draw(t, "removed") {
		d.ToolsRemoved = append(d.ToolsRemoved, tool())
	}
	return d
}

// What a system entry's data is written as, the fast path reads, as
// encoding/json does.
func TestDecodeSystemDataReadsWhatIsWritten(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw, err := json.Marshal(genSystemData(t))
		if err != nil {
			t.Fatal(err)
		}
		if !sameSystemDataAsEncodingJSON(t, raw) {
			t.Fatalf("the fast path gave up on %s", raw)
		}
	})
}

// systemTokens are what the tests splice into a system entry's data.
var systemTokens = []string{
	`"baseline":true,`, `"Baseline":true,`, `"baseline":null,`, `"baseline":1,`, `"baseline":nutrue,`, `"sections":null,`,
	`"sections":[{"key":"k","text":null}],`, `"sections":[{"key":"k","KEY":"j"}],`, `"sections":[{"key":1}],`, `"sections":[{"text":nul"x"}],`,
	`"toolsAdded":null,`, `"toolsAdded":[{"name":"n","parameters": { "a" : 1 } }],`, `"toolsAdded":[{"name":"n","extra":[1]}],`,
	`"toolsRemoved":[{"Name":"n"}],`, `"toolsRemoved":[null],`, `"other":{"x":[null]},`, "\"\x01\":1,", `"é":1,`,
	" ", ",", "}", "{", "]", "[", `"`, `\`, "null", "n", "nul",
}

func TestDecodeSystemDataAgreesWithEncodingJSONOnSplicedTexts(t *testing.T) {
	base := `{"baseline":true,"sections":[{"key":"a","text":"b"}],"toolsAdded":[{"name":"t","description":"d","parameters":{}}]}`
	took := 0
	for _, token := range systemTokens {
		for _, at := range []int{1, strings.Index(base, `[{`) + 2, strings.LastIndex(base, `[{`) + 2} {
			if sameSystemDataAsEncodingJSON(t, []byte(base[:at]+token+base[at:])) {
				took++
			}
		}
	}
	if took < 5 {
		t.Fatalf("the fast path took %d spliced texts", took)
	}
	rapid.Check(t, func(t *rapid.T) {
		raw, _ := json.Marshal(genSystemData(t))
		text := string(raw)
		for range rapid.IntRange(1, 3).Draw(t, "splices") {
			at := rapid.IntRange(0, len(text)).Draw(t, "at")
			text = text[:at] + rapid.SampledFrom(systemTokens).Draw(t, "token") + text[at:]
		}
		sameSystemDataAsEncodingJSON(t, []byte(text))
	})
	for _, text := range []string{`{"baseline":true,"baseline":false}`, `{"Sections":[]}`, `{"baseline":nutrue}`, `{"toolsAdded":[{"name":"a"}],"toolsAdded":[]}`} {
		if _, ok := decodeSystemData([]byte(text)); ok {
			t.Errorf("the fast path took %s", text)
		}
	}
}

func FuzzSystemDataDecoding(f *testing.F) {
	f.Add([]byte(`{"baseline":true,"sections":[{"key":"a","text":"b"},{"key":"c","text":null}],"toolsAdded":[{"name":"t","description":"d","parameters":{"type":"object"}}]}`))
	f.Add([]byte(`{"toolsRemoved":[{"name":"t","description":"","parameters":null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameSystemDataAsEncodingJSON(t, data)
	})
}
