package ai_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/ai"
)

// Every message role and block type, written in canonical form (fields in
// declaration order, the form json.Marshal writes), must decode and encode
// back to the same bytes: stored model projections are compared as bytes by
// traces and conformance.
func TestMessageJSONRoundTripKeepsBytes(t *testing.T) {
	tests := []struct {
		name string
		json string
	}{
		{"user with string content",
			`{"role":"user","content":"hello","timestamp":1700000000000}`},
		{"user with empty string content",
			`{"role":"user","content":"","timestamp":1}`},
		{"user with a one-text array keeps the array",
			`{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1}`},
		{"user with empty array",
			`{"role":"user","content":[],"timestamp":1}`},
		{"user with text and image blocks",
			`{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1}`},
		{"empty text block keeps its text field",
			`{"role":"user","content":[{"type":"text","text":""}],"timestamp":1}`},
		{"empty text block with signature",
			`{"role":"assistant","content":[{"type":"text","text":"","textSignature":"ts"}],"timestamp":1}`},
		{"system with string content, sections, tools added and removed",
			`{"role":"system","content":"You are pico.","sections":{"env":"cwd: /w","rules":null},"toolsAdded":[{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],"toolsRemoved":[{"name":"write"}],"timestamp":2}`},
		{"system with array content",
			`{"role":"system","content":[{"type":"text","text":"delta"}],"timestamp":2}`},
		{"system tool with constrained sampling",
			`{"role":"system","content":"","toolsAdded":[{"name":"emit","description":"","parameters":{"type":"object"},"constrainedSampling":{"type":"json_schema","strict":"prefer"}}],"timestamp":2}`},
		{"assistant with every block type and usage",
			`{"role":"assistant","content":[{"type":"thinking","thinking":"let me look","thinkingSignature":"sig-1"},{"type":"text","text":"Reading.","textSignature":"sig-2"},{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"a.go"},"thoughtSignature":"sig-3","namespace":"fs"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-x","usage":{"input":100,"output":50,"cacheRead":10,"cacheWrite":5,"cacheWrite1h":2,"reasoning":20,"totalTokens":165,"cost":{"input":0.0003,"output":0.00075,"cacheRead":0.000003,"cacheWrite":0.00001875,"total":0.00107175}},"stopReason":"toolUse","timestamp":3,"durationMs":812}`},
		{"assistant with empty and redacted thinking",
			`{"role":"assistant","content":[{"type":"thinking","thinking":""},{"type":"thinking","thinking":"","thinkingSignature":"opaque","redacted":true}],"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":3}`},
		{"assistant tool call with empty arguments",
			`{"role":"assistant","content":[{"type":"toolCall","id":"call_2","name":"now","arguments":{}}],"stopReason":"toolUse","timestamp":3}`},
		{"assistant with every optional field",
			`{"role":"assistant","content":[],"api":"openai-responses","provider":"openai","model":"gpt-x","stopReason":"deferred","responseModel":"gpt-x-2025","responseId":"resp_1","providerThinkingLevel":"high","thinkingLevel":"medium","diagnostics":{"retries":1},"deferred":{"provider":"openai","modelId":"gpt-x","api":"openai-responses","id":"job_1","expiresAt":1700000100000,"pollAfterMs":500,"data":{"cursor":"c"}},"errorMessage":"partial","rawStopReason":"in_progress","endTurn":false,"timestamp":4,"durationMs":1}`},
		{"assistant error",
			`{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded","timestamp":4}`},
		{"tool result with details, nested calls and error flag",
			`{"role":"toolResult","content":[{"type":"text","text":"ok"},{"type":"image","data":"AAAA","mimeType":"image/jpeg"}],"toolCallId":"call_1","toolName":"read","details":{"bytes":12},"nestedCalls":{"calls":[{"id":"n1","name":"grep","arguments":{"q":"x"},"argumentsBytes":9,"status":"ok","durationMs":3},{"id":"n2","name":"ls","status":"error","error":"denied"}],"complete":false},"isError":false,"timestamp":5,"durationMs":40}`},
		{"tool result that failed",
			`{"role":"toolResult","content":[{"type":"text","text":"no such file"}],"toolCallId":"call_1","toolName":"read","isError":true,"timestamp":5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m ai.Message
			if err := json.Unmarshal([]byte(tt.json), &m); err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(got) != tt.json {
				t.Errorf("round trip:\ngot  %s\nwant %s", got, tt.json)
			}
		})
	}
}

// Every stop reason the reference names is accepted and kept.
func TestStopReasonsRoundTrip(t *testing.T) {
	for _, r := range []ai.StopReason{ai.StopPending, ai.StopStop, ai.StopLength, ai.StopToolUse, ai.StopError, ai.StopAborted, ai.StopDeferred} {
		if !r.Valid() {
			t.Errorf("%q.Valid() = false; want true", r)
		}
		in := `{"role":"assistant","content":[],"stopReason":"` + string(r) + `","timestamp":1}`
		var m ai.Message
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Errorf("decode stopReason %q: %v", r, err)
			continue
		}
		if m.StopReason != r {
			t.Errorf("stopReason: got %q; want %q", m.StopReason, r)
		}
		if got, _ := json.Marshal(m); string(got) != in {
			t.Errorf("round trip: got %s; want %s", got, in)
		}
	}
	for _, r := range []ai.StopReason{"", "end_turn", "Stop"} {
		if r.Valid() {
			t.Errorf("%q.Valid() = true; want false", r)
		}
	}
}

// Go values built in code encode to the reference shapes, and that encoding is
// already canonical: decoding and re-encoding it changes nothing.
func TestBlockAndContentEncodeCanonically(t *testing.T) {
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"empty text block keeps text", ai.Text(""),
			`{"type":"text","text":""}`},
		{"empty thinking block keeps thinking", ai.Block{Type: ai.BlockThinking, ThinkingSignature: "s"},
			`{"type":"thinking","thinking":"","thinkingSignature":"s"}`},
		{"tool call without arguments encodes an empty object after name", ai.ToolCall("call_1", "now", nil),
			`{"type":"toolCall","id":"call_1","name":"now","arguments":{}}`},
		{"tool call without arguments keeps later fields after arguments", ai.Block{Type: ai.BlockToolCall, ID: "c", Name: "n", ThoughtSignature: "t"},
			`{"type":"toolCall","id":"c","name":"n","arguments":{},"thoughtSignature":"t"}`},
		{"tool call with arguments", ai.ToolCall("call_1", "read", json.RawMessage(`{"path":"a"}`)),
			`{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"a"}}`},
		{"plain content is a bare string", ai.PlainText("hi"),
			`"hi"`},
		{"plain empty content is an empty string", ai.PlainText(""),
			`""`},
		{"block content is an array", ai.Blocks(ai.Text("hi")),
			`[{"type":"text","text":"hi"}]`},
		{"zero content is an empty array", ai.Content{},
			`[]`},
		{"plain content with a signature stays an array", ai.Content{Blocks: []ai.Block{{Type: ai.BlockText, Text: "hi", TextSignature: "sig"}}, Plain: true},
			`[{"type":"text","text":"hi","textSignature":"sig"}]`},
		{"user text message", ai.UserText("hello", 7),
			`{"role":"user","content":"hello","timestamp":7}`},
		{"message with a zero content", ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopStop, Timestamp: 1},
			`{"role":"assistant","content":[],"stopReason":"stop","timestamp":1}`},
		{"tool result with isError false", ai.Message{Role: ai.RoleToolResult, Content: ai.Blocks(ai.Text("ok")), ToolCallID: "c", ToolName: "n", IsError: ai.Bool(false), Timestamp: 1},
			`{"role":"toolResult","content":[{"type":"text","text":"ok"}],"toolCallId":"c","toolName":"n","isError":false,"timestamp":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.value)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("encode:\ngot  %s\nwant %s", got, tt.want)
			}
			// Decode into a fresh value of the same type and encode again.
			back := reflect.New(reflect.TypeOf(tt.value))
			if err := json.Unmarshal(got, back.Interface()); err != nil {
				t.Fatalf("decode: %v", err)
			}
			again, err := json.Marshal(back.Elem().Interface())
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if string(again) != tt.want {
				t.Errorf("re-encode:\ngot  %s\nwant %s", again, tt.want)
			}
		})
	}
}

// A bare string decodes as plain content holding one text block; an array
// decodes as non-plain blocks.
func TestContentDecodesBothForms(t *testing.T) {
	var c ai.Content
	if err := json.Unmarshal([]byte(`"hi"`), &c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ai.PlainText("hi"), c); diff != "" {
		t.Errorf("string content (-want +got):\n%s", diff)
	}
	if got := c.TextOf(); got != "hi" {
		t.Errorf("TextOf: got %q; want %q", got, "hi")
	}
	c = ai.Content{}
	if err := json.Unmarshal([]byte(`[{"type":"text","text":"a"},{"type":"image","data":"AA","mimeType":"image/png"},{"type":"text","text":"b"}]`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Plain {
		t.Errorf("array content: got Plain true; want false")
	}
	if got := c.TextOf(); got != "ab" {
		t.Errorf("TextOf: got %q; want %q", got, "ab")
	}
}

// Decoding is strict about discriminators and required ids, and each error
// names what was wrong so a bad stored record can be found.
func TestDecodingRejectsMalformedMessages(t *testing.T) {
	tests := []struct {
		name string
		into string // "message" or "block"
		json string
		want []string // substrings the error must contain
	}{
		{"unknown role", "message",
			`{"role":"bot","content":"hi","timestamp":1}`, []string{"role", `"bot"`}},
		{"missing role", "message",
			`{"content":"hi","timestamp":1}`, []string{"role", `""`}},
		{"unknown block type", "block",
			`{"type":"video","data":"AA"}`, []string{"block type", `"video"`}},
		{"block without type", "block",
			`{"text":"x"}`, []string{"block type", `""`}},
		{"unknown block type inside a message", "message",
			`{"role":"user","content":[{"type":"text","text":"a"},{"type":"audio"}],"timestamp":1}`, []string{"block type", `"audio"`}},
		{"unknown stop reason", "message",
			`{"role":"assistant","content":[],"stopReason":"finished","timestamp":1}`, []string{"stopReason", `"finished"`}},
		{"tool call without id", "block",
			`{"type":"toolCall","name":"read","arguments":{}}`, []string{"toolCall", "id"}},
		{"tool call without id inside a message", "message",
			`{"role":"assistant","content":[{"type":"toolCall","id":"","name":"read"}],"stopReason":"toolUse","timestamp":1}`, []string{"toolCall", "id"}},
		{"tool result without toolCallId", "message",
			`{"role":"toolResult","content":[],"toolName":"read","isError":false,"timestamp":1}`, []string{"toolResult", "toolCallId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch tt.into {
			case "message":
				var m ai.Message
				err = json.Unmarshal([]byte(tt.json), &m)
			case "block":
				var b ai.Block
				err = json.Unmarshal([]byte(tt.json), &b)
			default:
				t.Fatalf("bad test: into %q", tt.into)
			}
			if err == nil {
				t.Fatalf("decode %s: got no error; want one naming %q", tt.json, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error: got %q; want it to contain %q", err, w)
				}
			}
		})
	}
}

// Usage.Add sums every counter and every cost. The test fills fields by
// reflection, so a field added to Usage or Cost and forgotten in Add fails it.
func TestUsageAddSumsEveryField(t *testing.T) {
	var u, v ai.Usage
	n := fillNumbers(reflect.ValueOf(&u).Elem(), 1, 1)
	fillNumbers(reflect.ValueOf(&v).Elem(), 1, 100)
	got := u.Add(v)
	var want ai.Usage
	fillNumbers(reflect.ValueOf(&want).Elem(), 1, 101)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Add (-want +got) over %d fields:\n%s", n-1, diff)
	}
	if got := u.Add(ai.Usage{}); got != u {
		t.Errorf("Add(zero): got %+v; want %+v", got, u)
	}
}

// fillNumbers sets the i-th numeric field (depth first, counting from next)
// of the struct v to i*scale and returns the next unused index.
func fillNumbers(v reflect.Value, next, scale int) int {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int64:
			f.SetInt(int64(next * scale))
			next++
		case reflect.Float64:
			// Halves add exactly in binary floating point.
			f.SetFloat(float64(next*scale) / 2)
			next++
		case reflect.Struct:
			next = fillNumbers(f, next, scale)
		default:
			panic("fillNumbers: unexpected field kind " + f.Kind().String() + " in " + v.Type().String())
		}
	}
	return next
}

// ToolCalls returns exactly the tool-call blocks, in content order.
func TestToolCallsReturnsCallsInOrder(t *testing.T) {
	a := ai.ToolCall("a", "read", json.RawMessage(`{"path":"x"}`))
	b := ai.ToolCall("b", "ls", nil)
	c := ai.ToolCall("c", "read", json.RawMessage(`{"path":"y"}`))
	tests := []struct {
		name    string
		content ai.Content
		want    []ai.Block
	}{
		{"no content", ai.Content{}, nil},
		{"text only", ai.Blocks(ai.Text("hi")), nil},
		{"calls among other blocks",
			ai.Blocks(ai.Block{Type: ai.BlockThinking, Thinking: "hm"}, a, ai.Text("and"), b, c),
			[]ai.Block{a, b, c}},
		{"calls keep their order, not their ids' order",
			ai.Blocks(c, a),
			[]ai.Block{c, a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ai.Message{Role: ai.RoleAssistant, Content: tt.content}
			got := m.ToolCalls()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ToolCalls (-want +got):\n%s", diff)
			}
		})
	}
}
