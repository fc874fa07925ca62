package ai

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/jsonvalue/jsontest"
)

// reference decodes data with encoding/json alone, the fast paths off.
func reference[T any](data []byte) (T, error) {
	fastPaths = false
	defer func() { fastPaths = true }()
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

type failer interface {
	Helper()
	Fatalf(string, ...any)
}

// sameAsReference fails t when a fast path takes data and encoding/json
// refuses it or reads another value; it reports whether the fast path
// took it.
func sameAsReference[T any](t failer, data []byte, fast func([]byte) (T, bool)) bool {
	t.Helper()
	got, ok := fast(data)
	if !ok {
		return false
	}
	want, err := reference[T](data)
	if err != nil {
		t.Fatalf("the fast path took %q; encoding/json refuses it: %v", data, err)
	}
	if !reflect.DeepEqual(want, got) { // cmp.Diff only then: it is slow
		t.Fatalf("the fast path read %q otherwise than encoding/json (-want +got):\n%s", data, cmp.Diff(want, got))
	}
	return true
}

// fastContent is Content's fast path alone.
func fastContent(data []byte) (Content, bool) {
	var c Content
	d := jsonvalue.NewDecoder(data)
	return c, readContent(d, &c) && d.End()
}

// fastUsage is Usage's fast path alone, into a zero usage.
func fastUsage(data []byte) (Usage, bool) {
	var u Usage
	d := jsonvalue.NewDecoder(data)
	return u, readUsage(d, &u) && d.End()
}

// checkAll holds every fast path to the reference on data, and reports
// whether the message path took it.
func checkAll(t failer, data []byte) bool {
	t.Helper()
	sameAsReference(t, data, decodeBlock)
	sameAsReference(t, data, fastContent)
	sameAsReference(t, data, fastUsage)
	checkDecodeUsage(t, data)
	took := sameAsReference(t, data, decodeMessage)
	if sameAsReference(t, data, readMessageAlone) != took {
		t.Fatalf("ReadMessage and UnmarshalJSON's fast path disagree on taking %q", data)
	}
	return took
}

// readMessageAlone is ReadMessage on a decoder of data alone.
func readMessageAlone(data []byte) (Message, bool) {
	var m Message
	d := jsonvalue.NewDecoder(data)
	return m, ReadMessage(d, &m) && d.End()
}

// checkDecodeUsage holds Usage.DecodeJSON to json.Unmarshal on data: a
// text it takes reads as json.Unmarshal reads it.
func checkDecodeUsage(t failer, data []byte) {
	t.Helper()
	var got Usage
	if !got.DecodeJSON(data) {
		return
	}
	want, wantErr := reference[Usage](data)
	if wantErr != nil || got != want {
		t.Fatalf("DecodeJSON took %q as %+v; json.Unmarshal gives %+v, %v", data, got, want, wantErr)
	}
}

var genString = rapid.SampledFrom([]string{"", "x", "é😀", "tab\there", "quote\"", "back\\slash", "\u2028", "\x00\x1f", "<&>", "\xff", "\ud7ff"})

func genBlock(t *rapid.T) Block {
	b := Block{Type: rapid.SampledFrom([]BlockType{BlockText, BlockThinking, BlockImage, BlockToolCall}).Draw(t, "type")}
	switch b.Type {
	case BlockText:
		b.Text, b.TextSignature = genString.Draw(t, "text"), genString.Draw(t, "sig")
	case BlockThinking:
		b.Thinking, b.ThinkingSignature, b.Redacted = genString.Draw(t, "thinking"), genString.Draw(t, "sig"), rapid.Bool().Draw(t, "redacted")
	case BlockImage:
		b.Data, b.MimeType = genString.Draw(t, "data"), genString.Draw(t, "mime")
	case BlockToolCall:
		b.ID, b.Name = "call_"+genString.Draw(t, "id"), genString.Draw(t, "name")
		b.Arguments = json.RawMessage(rapid.SampledFrom([]string{`{}`, `{"v":"a"}`, `{"n":[1,2.5e3,null],"o":{"<":true}}`}).Draw(t, "args"))
		b.ThoughtSignature, b.Namespace = genString.Draw(t, "thought"), genString.Draw(t, "ns")
	}
	return b
}

// genMessage draws a message of any role with any of the fields, the ones
// the fast path leaves to encoding/json included (rarely).
func genMessage(t *rapid.T) Message {
	m := Message{
		Role:      rapid.SampledFrom([]Role{RoleUser, RoleAssistant, RoleToolResult, RoleSystem}).Draw(t, "role"),
		Timestamp: rapid.Int64().Draw(t, "ts"),
	}
	if rapid.Bool().Draw(t, "plain") {
		m.Content = PlainText(genString.Draw(t, "text"))
	} else {
		m.Content = Blocks(rapid.SliceOfN(rapid.Custom(genBlock), 0, 3).Draw(t, "blocks")...)
	}
	if rapid.Bool().Draw(t, "assistant") {
		m.API, m.Provider, m.Model = genString.Draw(t, "api"), genString.Draw(t, "provider"), genString.Draw(t, "model")
		m.StopReason = rapid.SampledFrom([]StopReason{"", StopStop, StopToolUse, StopError}).Draw(t, "stop")
		m.ResponseModel, m.ResponseID = genString.Draw(t, "rm"), genString.Draw(t, "rid")
		m.ProviderThinkingLevel, m.ThinkingLevel = genString.Draw(t, "ptl"), genString.Draw(t, "tl")
		m.ErrorMessage, m.RawStopReason = genString.Draw(t, "err"), genString.Draw(t, "raw")
		m.DurationMs = rapid.Int64().Draw(t, "dur")
		if rapid.Bool().Draw(t, "usage") {
			m.Usage = &Usage{
				Input: rapid.Int64().Draw(t, "in"), Output: rapid.Int64().Draw(t, "out"), CacheWrite1h: rapid.Int64().Draw(t, "cw1h"),
				TotalTokens: rapid.Int64().Draw(t, "total"),
				Cost:        Cost{Input: rapid.Float64().Draw(t, "cin"), Total: rapid.Float64().Draw(t, "ctotal")},
			}
		}
		if rapid.Bool().Draw(t, "endTurn") {
			m.EndTurn = Bool(rapid.Bool().Draw(t, "endTurnValue"))
		}
		if rapid.Bool().Draw(t, "diagnostics") {
			m.Diagnostics = json.RawMessage(`{"k":["v",1]}`)
		}
	}
	if m.Role == RoleToolResult {
		m.ToolCallID, m.ToolName = "call_"+genString.Draw(t, "call"), genString.Draw(t, "tool")
		m.IsError = Bool(rapid.Bool().Draw(t, "isError"))
		if rapid.Bool().Draw(t, "details") {
			m.Details = json.RawMessage(`[null,"d"]`)
		}
	}
	if m.Role == RoleSystem && rapid.Bool().Draw(t, "tools") {
		m.ToolsAdded = []Tool{{Name: genString.Draw(t, "tname"), Description: genString.Draw(t, "tdesc"), Parameters: json.RawMessage(`{"type":"object"}`)}}
		m.ToolsRemoved = []ToolRef{{Name: genString.Draw(t, "rname")}}
	}
	switch rapid.IntRange(0, 20).Draw(t, "rare") {
	case 0:
		m.Deferred = &Deferred{Provider: "p", ID: "d"}
	case 1:
		m.NestedCalls = &NestedCalls{Calls: []NestedCall{{ID: "n", Name: "x", Status: "done"}}}
	case 2:
		text := genString.Draw(t, "section")
		m.Sections = map[string]*string{"a": &text, "b": nil}
	}
	return m
}

// rare reports whether m has a field the fast path leaves to encoding/json.
func rare(m Message) bool { return m.Deferred != nil || m.NestedCalls != nil || m.Sections != nil }

// What this package writes, the fast paths read, as encoding/json does.
func TestFastDecodingReadsWhatMessagesWrite(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(t)
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if took := checkAll(t, raw); took == rare(m) {
			t.Fatalf("the fast path took %s: %t; want %t", raw, took, !rare(m))
		}
		if m.Usage != nil {
			raw, _ := json.Marshal(m.Usage)
			if !sameAsReference(t, raw, fastUsage) {
				t.Fatalf("the usage fast path gave up on %s", raw)
			}
			checkDecodeUsage(t, raw)
		}
		for _, b := range m.Content.Blocks {
			raw, _ := json.Marshal(b)
			if !sameAsReference(t, raw, decodeBlock) {
				t.Fatalf("the block fast path gave up on %s", raw)
			}
		}
	})
}

// messageTokens are what rapid splices into a written message: keys of
// its fields given twice or in another case, unknown keys, nulls, values
// of the wrong kind, escapes, broken grammar.
var messageTokens = []string{
	`"role":"user",`, `"role":"other",`, `"Role":"user",`, `"ROLE":"user",`, `"content":null,`, `"content":"s",`, `"content":[],`,
	`"content":[{"type":"nope"}],`, `"content":[{"type":"toolCall"}],`, `"content":[{"type":"text","text":"a","TEXT":"b"}],`,
	`"usage":null,`, `"usage":{"input":1.5},`, `"usage":{"cost":{"total":1e400}},`, `"usage":{"cost":null,"zz":[1]},`, `"usage":{"Input":1},`,
	`"timestamp":null,`, `"timestamp":"1",`, `"timestamp":1e3,`, `"isError":null,`, `"isError":1,`, `"endTurn":false,`,
	`"stopReason":"nope",`, `"stopReason":null,`, `"toolCallId":"",`, `"unknown":{"a":[1,{"b":null}]},`, `"x\u0079":1,`,
	`"details":null,`, `"diagnostics": [ 1 , 2 ] ,`, `"toolsAdded":null,`, `"toolsAdded":[{"name":"n","NAME":"m"}],`, `"sections":null,`,
	`"deferred":null,`, "\"\x01\":1,", `"é":1,`, " ", ",", "}", "{", "]", `"`, `\`, "null", "n", "nu", "nul",
	`"role":nul"user",`, `"timestamp":nu5,`, `"usage":n{"input":1},`, `"endTurn":nultrue,`, `"toolsAdded":n[],`,
}

func TestFastDecodingAgreesWithEncodingJSONOnSplicedTexts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw, err := json.Marshal(genMessage(t))
		if err != nil {
			t.Fatal(err)
		}
		checkAll(t, []byte(jsontest.Splice(t, string(raw), messageTokens)))
	})
}

// Every splice token, at the start of a message and of its first block.
func TestFastDecodingAgreesWithEncodingJSONOnEverySpliceToken(t *testing.T) {
	base := `{"role":"assistant","content":[{"type":"text","text":"a"}],"usage":{"input":1,"cost":{"total":1}},"timestamp":1}`
	took := 0
	for _, token := range messageTokens {
		for _, at := range []int{1, strings.Index(base, `[{`) + 2, strings.Index(base, `"input"`)} {
			if checkAll(t, []byte(base[:at]+token+base[at:])) {
				took++
			}
		}
	}
	// Some tokens make texts the fast path reads, or it is not being
	// tested on them.
	if took < 5 {
		t.Fatalf("the fast path took %d spliced texts", took)
	}
	// And into a usage alone, where Usage.DecodeJSON reads it.
	usage := `{"input":1,"output":2,"cost":{"input":0.5,"total":1}}`
	usageTook := 0
	for _, token := range append(messageTokens, `"input":1,`, `"Input":1,`, `"cacheWrite1h":3,`, `"cost":{"total":"x"},`, `"cost":null,`, `"totalTokens":-0,`) {
		for _, at := range []int{1, strings.Index(usage, `"input":0.5`)} {
			text := []byte(usage[:at] + token + usage[at:])
			checkAll(t, text)
			if sameAsReference(t, text, fastUsage) {
				usageTook++
			}
		}
	}
	if usageTook < 5 {
		t.Fatalf("the usage fast path took %d spliced texts", usageTook)
	}
}

// The fast paths give up on exactly what they must leave to
// encoding/json, so that its result or its error is the answer.
func TestFastDecodingGivesUpWhereEncodingJSONDecides(t *testing.T) {
	for _, text := range []string{
		`{"role":"user","content":"a","role":"assistant"}`,
		`{"role":"user","Content":"a"}`,
		`{"role":"user","content":null}`,
		`{"role":"user","content":"a","sections":{"a":"b"}}`,
		`{"role":"user","content":"a","timestamp":1.5}`,
		`{"role":"nobody","content":"a"}`,
		`{"role":"user","content":[{"type":"toolCall","name":"x"}]}`,
		`{"role":"user","content":"\[],"timestamp":1}`,
		`{"role":"user","content":"a"} x`,
		`{"role":nul"user","content":"hi","timestamp":1}`,
		`{"role":"user","content":"hi","timestamp":nu5}`,
		`{"role":"assistant","content":[],"usage":n{"input":1}}`,
		`{"role":"user","content":[{"type":"text","text":n"x"}]}`,
	} {
		if _, ok := decodeMessage([]byte(text)); ok {
			t.Errorf("the fast path took %s", text)
		}
		var m Message
		gotErr := m.UnmarshalJSON([]byte(text))
		want, wantErr := reference[Message]([]byte(text))
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || gotErr == nil && !cmp.Equal(m, want) {
			t.Errorf("UnmarshalJSON(%s) = %+v, %v; encoding/json gives %+v, %v", text, m, gotErr, want, wantErr)
		}
	}
	for _, text := range []string{`{"role":"user","content":"a"}`, `{"role":"user","content":"a","extra":[1],"timestamp":null}`} {
		if !checkAll(t, []byte(text)) {
			t.Errorf("the fast path gave up on %s", text)
		}
	}
}

func FuzzMessageDecoding(f *testing.F) {
	for _, text := range []string{
		`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"toolCall","id":"c","name":"n","arguments":{}}],"usage":{"input":1,"cost":{"total":0.5}},"stopReason":"toolUse","timestamp":1}`,
		`{"role":"toolResult","content":[{"type":"text","text":"x"}],"toolCallId":"c","toolName":"n","isError":false,"timestamp":2}`,
		`{"role":"system","content":"","toolsAdded":[{"name":"a","description":"d","parameters":{"type":"object"}}],"timestamp":3}`,
		`{"role":"user","content":"hi","timestamp":4}`,
		`{"type":"thinking","thinking":"t","redacted":true}`,
		`[{"type":"image","data":"AA==","mimeType":"image/png"}]`,
		strings.Repeat(`{"role":"user","content":`, 3),
	} {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAll(t, data)
	})
}

// ReadMessage reads messages inside a larger text, each where the decoder
// stands, as encoding/json reads the whole; with the fast paths off it
// takes nothing.
func TestReadMessageReadsWithinALargerText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := rapid.SliceOfN(rapid.Custom(genMessage), 0, 4).Draw(t, "messages")
		raw, err := json.Marshal(map[string]any{"before": 1, "messages": ms, "after": "x"})
		if err != nil {
			t.Fatal(err)
		}
		var got []Message
		d := jsonvalue.NewDecoder(raw)
		ok := d.Members(jsonvalue.KnownFields("after", "before", "messages"), func(i int) bool {
			if i == 2 {
				return jsonvalue.SliceInto(d, &got, func(m *Message) bool { return ReadMessage(d, m) })
			}
			_, ok := d.Value()
			return ok
		}) && d.End()
		if ok != !slices.ContainsFunc(ms, rare) {
			t.Fatalf("ReadMessage took %s: %t; want %t", raw, ok, !ok)
		}
		if !ok {
			return
		}
		var want struct{ Messages []Message }
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want.Messages, got) {
			t.Fatalf("ReadMessage read %s otherwise than encoding/json (-want +got):\n%s", raw, cmp.Diff(want.Messages, got))
		}
	})
	raw, _ := json.Marshal(UserText("hi", 1))
	fastPaths = false
	defer func() { fastPaths = true }()
	if _, ok := readMessageAlone(raw); ok {
		t.Fatal("ReadMessage took a message with the fast paths off")
	}
}
