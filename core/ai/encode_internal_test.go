package ai

import (
	"encoding/json"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// marshalMessageReflect is what encoding/json writes of a message's fields.
func marshalMessageReflect(m Message) ([]byte, error) {
	type plain Message
	return json.Marshal(plain(m))
}

func sameMessageBytes(t interface{ Fatalf(string, ...any) }, m Message) {
	want, wantErr := marshalMessageReflect(m)
	got, err := m.AppendJSON([]byte("prefix"))
	if (err != nil) != (wantErr != nil) || err == nil && string(got) != "prefix"+string(want) {
		t.Fatalf("AppendJSON(%#v) = %s, %v; encoding/json writes %s, %v", m, got, err, want, wantErr)
	}
	if err != nil {
		return
	}
	if out, err := json.Marshal(m); err != nil || string(out) != string(want) {
		t.Fatalf("json.Marshal(%#v) = %s, %v; want %s", m, out, err, want)
	}
}

// Messages of every role with every field, plain or block content, the
// fields left to encoding/json now and then, and raw values and costs it
// rewrites or refuses: the bytes written by hand are encoding/json's.
func TestMessageAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(t)
		if rapid.Bool().Draw(t, "anyBlocks") {
			m.Content = Blocks(rapid.SliceOfN(rapid.Custom(genAnyBlock), 0, 3).Draw(t, "blocks")...)
		}
		switch rapid.IntRange(0, 10).Draw(t, "odd") {
		case 0:
			m.Details = json.RawMessage(`{"a": "<b>"}`)
		case 1:
			m.Diagnostics = json.RawMessage(`{"a":`)
		case 2:
			m.Usage = &Usage{Cost: Cost{Total: math.NaN()}}
		case 3:
			m.Usage = &Usage{Input: 1, Cost: Cost{Input: 1e-7, Output: 1e21, CacheRead: 0.1, Total: -2.5}}
		case 4:
			m.Content = Content{Plain: true, Blocks: []Block{{Type: BlockText, Text: "x", TextSignature: "s"}}}
		case 5:
			m.Content = Content{}
		case 7:
			m.ToolsRemoved = []ToolRef{{Name: "gone"}}
		case 9:
			m.ToolsAdded = []Tool{genTool(t), genTool(t)}
		case 10:
			m.ToolsAdded, m.ToolsRemoved = []Tool{}, []ToolRef{}
		case 6: // content encoding/json rewrites, then fields written by hand
			m.Content = Blocks(ToolCall("c", "f", json.RawMessage(`{"a": 1}`)))
			m.Usage = &Usage{Input: 2}
			m.Details = json.RawMessage(`{"d":1}`)
		}
		sameMessageBytes(t, m)
	})
}

// A message written by hand reads back as what it writes again: the hand
// writer and the hand reader agree with each other as with encoding/json
// (after one trip, which turns invalid UTF-8 into U+FFFD).
func TestMessageAppendJSONRoundTrips(t *testing.T) {
	trip := func(t *rapid.T, raw []byte) []byte {
		var back Message
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		again, err := back.AppendJSON(nil)
		if err != nil {
			t.Fatalf("%#v: %v", back, err)
		}
		return again
	}
	rapid.Check(t, func(t *rapid.T) {
		raw, err := genMessage(t).AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		once := trip(t, raw)
		if twice := trip(t, once); string(twice) != string(once) {
			t.Fatalf("written again %s; before %s", twice, once)
		}
	})
}

// A hand writer that gives up appends nothing to the caller's buffer.
func TestAppendPlainGivesUpWithoutWriting(t *testing.T) {
	rewritten := json.RawMessage(`{"a": 1}`)
	bad := Block{Type: BlockToolCall, Arguments: rewritten}
	for name, write := range map[string]func([]byte) ([]byte, bool){
		"block":            bad.appendPlain,
		"frame content":    Frame{Type: FrameTextStart, Content: &bad}.appendPlain,
		"frame tool call":  Frame{Type: FrameToolCallStart, ToolCall: &bad}.appendPlain,
		"frame arguments":  Frame{Type: FrameToolCallEnd, Arguments: rewritten}.appendPlain,
		"frame partial":    Frame{Type: FrameStart, Partial: &Message{Role: RoleAssistant, Content: Blocks(bad)}}.appendPlain,
		"message content":  Message{Role: RoleAssistant, Content: Blocks(bad), Usage: &Usage{}}.appendPlain,
		"message usage":    Message{Role: RoleAssistant, Usage: &Usage{Cost: Cost{Input: math.Inf(1)}}}.appendPlain,
		"message details":  Message{Role: RoleToolResult, Details: rewritten, Timestamp: 1}.appendPlain,
		"message sections": Message{Role: RoleSystem, Sections: map[string]*string{}}.appendPlain,
		"message tools":    Message{Role: RoleSystem, ToolsAdded: []Tool{{Name: "a", Parameters: json.RawMessage(`{}`)}, {Name: "b", Parameters: rewritten}}}.appendPlain,
		"tool parameters":  Tool{Name: "t", Parameters: rewritten}.appendPlain,
		"tool sampling":    Tool{Name: "t", Parameters: json.RawMessage(`{}`), ConstrainedSampling: json.RawMessage(`"<"`)}.appendPlain,
	} {
		if got, ok := write([]byte("prefix")); ok || string(got) != "prefix" {
			t.Errorf("%s: appendPlain = %q, %t; want the prefix alone and false", name, got, ok)
		}
	}
}

// genTool draws a tool whose raw values are now and then ones encoding/json
// rewrites (space, <, U+2028) or refuses (empty, not JSON), or null.
func genTool(t *rapid.T) Tool {
	raw := rapid.SampledFrom([]json.RawMessage{
		nil, json.RawMessage(``), json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"type": "object"}`),
		json.RawMessage(`{"d":"a<b"}`), json.RawMessage("\"\u2028\""), json.RawMessage("\"\u2028\""[:1] + "\u2028\""),
		json.RawMessage(`{"a":`), json.RawMessage(`null`), json.RawMessage(`{"e":"\\\" x"}`),
	})
	return Tool{Name: genString.Draw(t, "name"), Description: genString.Draw(t, "description"),
		Parameters: raw.Draw(t, "parameters"), ConstrainedSampling: raw.Draw(t, "sampling")}
}

// A tool written by hand is json.Marshal's bytes, and where encoding/json
// refuses it, json.Marshal's error, after whatever the buffer held.
func TestToolAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	hand := 0
	rapid.Check(t, func(t *rapid.T) {
		tool := genTool(t)
		want, wantErr := json.Marshal(tool)
		got, err := tool.AppendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) || err == nil && string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJSON(%#v) = %s, %v; json.Marshal writes %s, %v", tool, got, err, want, wantErr)
		}
		if _, ok := tool.appendPlain(nil); ok {
			hand++
		}
	})
	if hand == 0 {
		t.Fatal("no tool was written by hand")
	}
}

func FuzzMessageEncoding(f *testing.F) {
	f.Add("assistant", "hello", []byte(`{"a":1}`), 1.5, int64(3))
	f.Add("toolResult", "<\u2028\xff", []byte(`[1, 2]`), 1e-9, int64(-1))
	f.Fuzz(func(t *testing.T, role, s string, raw []byte, cost float64, n int64) {
		m := Message{Role: Role(role), Content: Blocks(Text(s), Block{Type: BlockToolCall, ID: s, Arguments: raw}), Model: s,
			Usage: &Usage{Input: n, Cost: Cost{Total: cost}}, Details: raw, ErrorMessage: s, Timestamp: n, DurationMs: n}
		sameMessageBytes(t, m)
		m.Content = PlainText(s)
		sameMessageBytes(t, m)
	})
}

// A usage written by hand is json.Marshal's bytes, and a cost it refuses
// json.Marshal's error, after whatever the buffer held.
func TestUsageAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	costs := []float64{0, 1, -2.5, 1e-7, 1e21, 0.1, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(-1)}
	rapid.Check(t, func(t *rapid.T) {
		cost := func(label string) float64 { return rapid.SampledFrom(costs).Draw(t, label) }
		u := Usage{Input: rapid.Int64().Draw(t, "input"), Output: rapid.Int64().Draw(t, "output"), CacheRead: rapid.Int64().Draw(t, "read"),
			CacheWrite: rapid.Int64().Draw(t, "write"), TotalTokens: rapid.Int64().Draw(t, "total"),
			Cost: Cost{Input: cost("ci"), Output: cost("co"), CacheRead: cost("cr"), CacheWrite: cost("cw"), Total: cost("ct")}}
		if rapid.Bool().Draw(t, "extra") {
			u.CacheWrite1h, u.Reasoning = rapid.Int64().Draw(t, "1h"), rapid.Int64().Draw(t, "reasoning")
		}
		want, wantErr := json.Marshal(u)
		got, err := u.AppendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() || err == nil && string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJSON(%+v) = %s, %v; json.Marshal writes %s, %v", u, got, err, want, wantErr)
		}
	})
}
