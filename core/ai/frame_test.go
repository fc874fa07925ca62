package ai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/ai"
)

// simulate streams final the way the faux provider does (§3): start with
// empty content, then per block a start, deltas of chunk characters and an
// end, then done. Tool calls start with args {} and their deltas slice the
// arguments JSON. Every event shares one live partial, which emit must copy
// from before simulate changes it further.
func simulate(final ai.Message, chunk int, emit func(ai.StreamEvent)) {
	p := final
	p.Content = ai.Blocks()
	p.StopReason = ai.StopPending
	partial := &p
	emit(ai.StreamEvent{Type: ai.EventStart, Partial: partial})
	pieces := func(s string) []string {
		var out []string
		r := []rune(s)
		for len(r) > 0 {
			n := min(chunk, len(r))
			out = append(out, string(r[:n]))
			r = r[n:]
		}
		return out
	}
	for i, b := range final.Content.Blocks {
		switch b.Type {
		case ai.BlockText:
			partial.Content.Blocks = append(partial.Content.Blocks, ai.Block{Type: ai.BlockText})
			emit(ai.StreamEvent{Type: ai.EventTextStart, ContentIndex: i, Partial: partial})
			for _, d := range pieces(b.Text) {
				partial.Content.Blocks[i].Text += d
				emit(ai.StreamEvent{Type: ai.EventTextDelta, ContentIndex: i, Delta: d, Partial: partial})
			}
			partial.Content.Blocks[i] = b
			emit(ai.StreamEvent{Type: ai.EventTextEnd, ContentIndex: i, Content: b.Text, Partial: partial})
		case ai.BlockThinking:
			partial.Content.Blocks = append(partial.Content.Blocks, ai.Block{Type: ai.BlockThinking})
			emit(ai.StreamEvent{Type: ai.EventThinkingStart, ContentIndex: i, Partial: partial})
			for _, d := range pieces(b.Thinking) {
				partial.Content.Blocks[i].Thinking += d
				emit(ai.StreamEvent{Type: ai.EventThinkingDelta, ContentIndex: i, Delta: d, Partial: partial})
			}
			partial.Content.Blocks[i] = b
			emit(ai.StreamEvent{Type: ai.EventThinkingEnd, ContentIndex: i, Content: b.Thinking, Partial: partial})
		case ai.BlockToolCall:
			partial.Content.Blocks = append(partial.Content.Blocks, ai.ToolCall(b.ID, b.Name, json.RawMessage(`{}`)))
			emit(ai.StreamEvent{Type: ai.EventToolCallStart, ContentIndex: i, Partial: partial})
			var buf string
			for _, d := range pieces(string(b.Arguments)) {
				buf += d
				if json.Valid([]byte(buf)) {
					partial.Content.Blocks[i].Arguments = json.RawMessage(buf)
				}
				emit(ai.StreamEvent{Type: ai.EventToolCallDelta, ContentIndex: i, Delta: d, Partial: partial})
			}
			partial.Content.Blocks[i] = b
			tc := b
			emit(ai.StreamEvent{Type: ai.EventToolCallEnd, ContentIndex: i, ToolCall: &tc, Partial: partial})
		}
	}
	done := final
	emit(ai.StreamEvent{Type: ai.EventDone, Reason: final.StopReason, Message: &done})
}

func assistant(blocks ...ai.Block) ai.Message {
	return ai.Message{
		Role: ai.RoleAssistant, Content: ai.Blocks(blocks...),
		API: "faux", Provider: "faux", Model: "faux-1",
		Usage: &ai.Usage{Input: 3, Output: 5, TotalTokens: 8}, StopReason: ai.StopToolUse,
		ResponseID: "resp-1", Timestamp: 1700000000000,
	}
}

func fullMessages() map[string]ai.Message {
	return map[string]ai.Message{
		"text only":    assistant(ai.Text("Hello, world! How are you today?")),
		"empty text":   assistant(ai.Text("")),
		"unicode text": assistant(ai.Text("héllo wörld — ✓ 日本語")),
		"thinking, text and tool call": assistant(
			ai.Block{Type: ai.BlockThinking, Thinking: "Let me think about it.", ThinkingSignature: "sig-th"},
			ai.Block{Type: ai.BlockText, Text: "I will read the file.", TextSignature: "sig-tx"},
			ai.Block{Type: ai.BlockToolCall, ID: "call-1", Name: "read",
				Arguments: json.RawMessage(`{"path":"/w/a.go","limit":10}`), ThoughtSignature: "ts", Namespace: "fs"},
		),
		"two tool calls": assistant(
			ai.ToolCall("c1", "ls", json.RawMessage(`{"dir":"."}`)),
			ai.ToolCall("c2", "grep", json.RawMessage(`{"pattern":"a\"b","paths":["x","y"]}`)),
		),
		"redacted thinking": assistant(ai.Block{Type: ai.BlockThinking, Thinking: "", ThinkingSignature: "opaque", Redacted: true}),
	}
}

// encodeEager encodes events as they arrive (eager) and returns the frames.
func encodeEager(t *testing.T, final ai.Message, chunk int) []ai.Frame {
	t.Helper()
	var enc ai.FrameEncoder
	var frames []ai.Frame
	simulate(final, chunk, func(ev ai.StreamEvent) {
		f, ok, err := enc.Encode(ev)
		if err != nil {
			t.Fatalf("Encode(%s) = %v; want no error", ev.Type, err)
		}
		if ok {
			frames = append(frames, f)
		}
	})
	return frames
}

func wantReduced(final ai.Message) *ai.Message {
	w := final
	w.StopReason = ai.StopPending
	return &w
}

func TestFrameEncodeThenReduceRebuildsMessage(t *testing.T) {
	for name, final := range fullMessages() {
		for _, chunk := range []int{1, 3, 1000} {
			t.Run(name, func(t *testing.T) {
				frames := encodeEager(t, final, chunk)
				got, err := ReduceOK(t, frames)
				if err != nil {
					return
				}
				if diff := cmp.Diff(wantReduced(final), got); diff != "" {
					t.Errorf("chunk %d: ReduceFrames mismatch (-want +got):\n%s", chunk, diff)
				}
			})
		}
	}
}

// Encoding late, after the live partial has moved on, must not duplicate
// what the snapshots already hold.
func TestFrameEncodeLateSnapshotsRebuildsMessage(t *testing.T) {
	for name, final := range fullMessages() {
		t.Run(name, func(t *testing.T) {
			var events []ai.StreamEvent
			simulate(final, 4, func(ev ai.StreamEvent) { events = append(events, ev) })
			var enc ai.FrameEncoder
			var frames []ai.Frame
			for _, ev := range events {
				f, ok, err := enc.Encode(ev)
				if err != nil {
					t.Fatalf("Encode(%s) = %v; want no error", ev.Type, err)
				}
				if ok {
					frames = append(frames, f)
				}
			}
			got, err := ReduceOK(t, frames)
			if err != nil {
				return
			}
			if diff := cmp.Diff(wantReduced(final), got); diff != "" {
				t.Errorf("ReduceFrames mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func ReduceOK(t *testing.T, frames []ai.Frame) (*ai.Message, error) {
	t.Helper()
	got, err := ai.ReduceFrames(frames)
	if err != nil {
		t.Errorf("ReduceFrames = %v; want no error", err)
	}
	return got, err
}

func TestFrameReduceCutStream(t *testing.T) {
	final := assistant(
		ai.Block{Type: ai.BlockThinking, Thinking: "hmm", ThinkingSignature: "sig"},
		ai.Text("abcdef"),
		ai.ToolCall("c1", "read", json.RawMessage(`{"path":"x"}`)),
	)
	var events []ai.StreamEvent
	var enc ai.FrameEncoder
	var frames [][]ai.Frame // frames after each event
	var acc []ai.Frame
	simulate(final, 2, func(ev ai.StreamEvent) {
		f, ok, err := enc.Encode(ev)
		if err != nil {
			t.Fatalf("Encode(%s) = %v", ev.Type, err)
		}
		if ok {
			acc = append(acc, f)
		}
		events = append(events, ev)
		frames = append(frames, append([]ai.Frame(nil), acc...))
	})
	// Events: 0 start; 1 thinking_start; 2,3 deltas; 4 thinking_end;
	// 5 text_start; 6,7,8 deltas; 9 text_end; 10 toolcall_start;
	// 11..16 deltas of {"path":"x"}; 17 toolcall_end; 18 done.
	think := func(s, sig string) ai.Block {
		return ai.Block{Type: ai.BlockThinking, Thinking: s, ThinkingSignature: sig}
	}
	tests := []struct {
		name  string
		after int
		want  []ai.Block
	}{
		{"after start", 0, []ai.Block{}},
		{"mid thinking", 2, []ai.Block{think("hm", "")}},
		{"after thinking end", 4, []ai.Block{think("hmm", "sig")}},
		{"mid text", 7, []ai.Block{think("hmm", "sig"), ai.Text("abcd")}},
		{"tool started, no delta", 10, []ai.Block{think("hmm", "sig"), ai.Text("abcdef"), ai.ToolCall("c1", "read", json.RawMessage(`{}`))}},
		{"tool args incomplete", 13, []ai.Block{think("hmm", "sig"), ai.Text("abcdef"), ai.ToolCall("c1", "read", json.RawMessage(`{}`))}},
		{"tool args complete, no end", 16, []ai.Block{think("hmm", "sig"), ai.Text("abcdef"), ai.ToolCall("c1", "read", json.RawMessage(`{"path":"x"}`))}},
	}
	if len(events) != 19 {
		t.Fatalf("simulate gave %d events; want 19", len(events))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ai.ReduceFrames(frames[tt.after])
			if err != nil {
				t.Fatalf("ReduceFrames = %v; want no error", err)
			}
			if got.StopReason != ai.StopPending {
				t.Errorf("got stopReason %q; want pending", got.StopReason)
			}
			if diff := cmp.Diff(tt.want, got.Content.Blocks); diff != "" {
				t.Errorf("content mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFrameEncoderTrimsCoveredDeltas(t *testing.T) {
	tests := []struct {
		name     string
		kind     ai.BlockType
		snapshot string
		deltas   []string
		want     []string
	}{
		{"nothing covered", ai.BlockText, "", []string{"ab", "c"}, []string{"ab", "c"}},
		{"partly covered", ai.BlockText, "Hel", []string{"He", "llo", " world"}, []string{"lo", " world"}},
		{"fully covered", ai.BlockText, "Hello", []string{"He", "llo"}, nil},
		{"runes, not bytes", ai.BlockText, "hé", []string{"héllo"}, []string{"llo"}},
		{"thinking", ai.BlockThinking, "abc", []string{"a", "bcd"}, []string{"d"}},
		{"empty delta", ai.BlockText, "", []string{"", "x"}, []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := ai.Block{Type: tt.kind}
			startEv, deltaEv := ai.EventTextStart, ai.EventTextDelta
			if tt.kind == ai.BlockThinking {
				snap.Thinking = tt.snapshot
				startEv, deltaEv = ai.EventThinkingStart, ai.EventThinkingDelta
			} else {
				snap.Text = tt.snapshot
			}
			partial := &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(snap)}
			var enc ai.FrameEncoder
			mustEncode(t, &enc, ai.StreamEvent{Type: ai.EventStart, Partial: partial})
			f, ok := mustEncode(t, &enc, ai.StreamEvent{Type: startEv, Partial: partial})
			if !ok || f.Content == nil {
				t.Fatalf("start frame = %+v, %v; want a frame with content", f, ok)
			}
			var got []string
			for _, d := range tt.deltas {
				if f, ok := mustEncode(t, &enc, ai.StreamEvent{Type: deltaEv, Delta: d, Partial: partial}); ok {
					got = append(got, f.Delta)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("got deltas %q; want %q", got, tt.want)
			}
		})
	}
}

func TestFrameEncoderToolCallCheckpoint(t *testing.T) {
	tests := []struct {
		name     string
		snapshot string
		deltas   []string
		want     []ai.Frame
		reduced  string // arguments after reducing without an end frame
	}{
		{"empty snapshot passes through", `{}`, []string{`{"a"`, `:1}`},
			[]ai.Frame{{Type: ai.FrameToolCallDelta, Delta: `{"a"`}, {Type: ai.FrameToolCallDelta, Delta: `:1}`}},
			`{"a":1}`},
		{"buffers until the snapshot is covered", `{"a":1}`, []string{`{"a"`, `: 1,`, `"b":2}`},
			[]ai.Frame{{Type: ai.FrameToolCallCheckpoint, JSON: `{"a": 1,`}, {Type: ai.FrameToolCallDelta, Delta: `"b":2}`}},
			`{"a": 1,"b":2}`},
		{"never covered keeps start args", `{"a":"xyz"}`, []string{`{"a":"x`},
			nil, `{"a":"xyz"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			partial := &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("c", "f", json.RawMessage(tt.snapshot)))}
			var enc ai.FrameEncoder
			start, _ := mustEncode(t, &enc, ai.StreamEvent{Type: ai.EventStart, Partial: partial})
			ts, _ := mustEncode(t, &enc, ai.StreamEvent{Type: ai.EventToolCallStart, Partial: partial})
			frames := []ai.Frame{start, ts}
			var got []ai.Frame
			for _, d := range tt.deltas {
				if f, ok := mustEncode(t, &enc, ai.StreamEvent{Type: ai.EventToolCallDelta, Delta: d, Partial: partial}); ok {
					got = append(got, f)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("frames mismatch (-want +got):\n%s", diff)
			}
			m, err := ai.ReduceFrames(append(frames, got...))
			if err != nil {
				t.Fatalf("ReduceFrames = %v", err)
			}
			if args := string(m.Content.Blocks[0].Arguments); args != tt.reduced {
				t.Errorf("got arguments %s; want %s", args, tt.reduced)
			}
		})
	}
}

func mustEncode(t *testing.T, enc *ai.FrameEncoder, ev ai.StreamEvent) (ai.Frame, bool) {
	t.Helper()
	f, ok, err := enc.Encode(ev)
	if err != nil {
		t.Fatalf("Encode(%s) = %v; want no error", ev.Type, err)
	}
	return f, ok
}

func TestFrameEncoderErrors(t *testing.T) {
	textPartial := &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text(""))}
	thinkPartial := &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Block{Type: ai.BlockThinking})}
	start := ai.StreamEvent{Type: ai.EventStart, Partial: textPartial}
	tests := []struct {
		name    string
		events  []ai.StreamEvent
		wantErr string
	}{
		{"delta before start", []ai.StreamEvent{{Type: ai.EventTextDelta, Delta: "x", Partial: textPartial}}, "before start"},
		{"block start before start", []ai.StreamEvent{{Type: ai.EventTextStart, Partial: textPartial}}, "before start"},
		{"second start", []ai.StreamEvent{start, start}, "second start"},
		{"block started twice", []ai.StreamEvent{start,
			{Type: ai.EventTextStart, Partial: textPartial}, {Type: ai.EventTextStart, Partial: textPartial}}, "started twice"},
		{"start type mismatch", []ai.StreamEvent{start, {Type: ai.EventTextStart, Partial: thinkPartial}}, "thinking block"},
		{"delta type mismatch", []ai.StreamEvent{start,
			{Type: ai.EventTextStart, Partial: textPartial}, {Type: ai.EventThinkingDelta, Delta: "x", Partial: textPartial}}, "text block"},
		{"delta for unstarted block", []ai.StreamEvent{start, {Type: ai.EventTextDelta, Delta: "x", Partial: textPartial}}, "not started"},
		{"event after done", []ai.StreamEvent{start, {Type: ai.EventDone, Reason: ai.StopStop},
			{Type: ai.EventTextStart, Partial: textPartial}}, "after the stream ended"},
		{"event after error", []ai.StreamEvent{{Type: ai.EventError, Reason: ai.StopError}, start}, "after the stream ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var enc ai.FrameEncoder
			var err error
			for i, ev := range tt.events {
				_, _, err = enc.Encode(ev)
				if i < len(tt.events)-1 && err != nil {
					t.Fatalf("Encode(event %d, %s) = %v; want no error", i, ev.Type, err)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFrameEncoderTerminalEventsGiveNoFrame(t *testing.T) {
	tests := []struct {
		name string
		ev   ai.StreamEvent
	}{
		{"done", ai.StreamEvent{Type: ai.EventDone, Reason: ai.StopStop}},
		{"error without start", ai.StreamEvent{Type: ai.EventError, Reason: ai.StopError}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var enc ai.FrameEncoder
			_, ok, err := enc.Encode(tt.ev)
			if ok || err != nil {
				t.Errorf("got ok=%v err=%v; want ok=false err=nil", ok, err)
			}
		})
	}
}

func TestReduceFramesErrorsAndNoStart(t *testing.T) {
	start := ai.Frame{Type: ai.FrameStart, Partial: &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks()}}
	textStart := func(i int) ai.Frame {
		return ai.Frame{Type: ai.FrameTextStart, ContentIndex: i, Content: &ai.Block{Type: ai.BlockText}}
	}
	tests := []struct {
		name    string
		frames  []ai.Frame
		wantErr string // "" means nil message, nil error
	}{
		{"no frames", nil, ""},
		{"frame before start", []ai.Frame{textStart(0)}, "before start"},
		{"second start", []ai.Frame{start, start}, "second start"},
		{"block start leaves a gap", []ai.Frame{start, textStart(1)}, "want 0"},
		{"block start overlaps", []ai.Frame{start, textStart(0), textStart(0)}, "want 1"},
		{"delta for missing block", []ai.Frame{start, {Type: ai.FrameTextDelta, ContentIndex: 0, Delta: "x"}}, "not started"},
		{"delta of wrong type", []ai.Frame{start, textStart(0), {Type: ai.FrameToolCallDelta, ContentIndex: 0, Delta: "x"}}, "text block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ai.ReduceFrames(tt.frames)
			if tt.wantErr == "" {
				if got != nil || err != nil {
					t.Errorf("got %v, %v; want nil, nil", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFrameJSONRoundTrip(t *testing.T) {
	for name, final := range fullMessages() {
		t.Run(name, func(t *testing.T) {
			frames := encodeEager(t, final, 5)
			data, err := json.Marshal(frames)
			if err != nil {
				t.Fatalf("Marshal = %v", err)
			}
			var back []ai.Frame
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("Unmarshal = %v", err)
			}
			if diff := cmp.Diff(frames, back); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
			again, _ := json.Marshal(back)
			if string(again) != string(data) {
				t.Errorf("got bytes %s; want %s", again, data)
			}
		})
	}
}

func TestFrameJSONShapes(t *testing.T) {
	tests := []struct {
		name  string
		frame ai.Frame
		want  string
	}{
		{"start has no contentIndex",
			ai.Frame{Type: ai.FrameStart, Partial: &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(), StopReason: ai.StopPending, Timestamp: 1}},
			`{"type":"start","partial":{"role":"assistant","content":[],"stopReason":"pending","timestamp":1}}`},
		{"text start carries the block",
			ai.Frame{Type: ai.FrameTextStart, Content: &ai.Block{Type: ai.BlockText}},
			`{"type":"text_start","contentIndex":0,"content":{"type":"text","text":""}}`},
		{"text end carries a string",
			ai.Frame{Type: ai.FrameTextEnd, ContentIndex: 2, EndContent: "hi", TextSignature: "s"},
			`{"type":"text_end","contentIndex":2,"content":"hi","textSignature":"s"}`},
		{"thinking end",
			ai.Frame{Type: ai.FrameThinkingEnd, ContentIndex: 1, ThinkingSignature: "s", Redacted: true},
			`{"type":"thinking_end","contentIndex":1,"content":"","thinkingSignature":"s","redacted":true}`},
		{"checkpoint",
			ai.Frame{Type: ai.FrameToolCallCheckpoint, ContentIndex: 0, JSON: `{"a":`},
			`{"type":"toolcall_checkpoint","contentIndex":0,"json":"{\"a\":"}`},
		{"toolcall end",
			ai.Frame{Type: ai.FrameToolCallEnd, ContentIndex: 0, ID: "c", Name: "f", Namespace: "ns"},
			`{"type":"toolcall_end","contentIndex":0,"id":"c","name":"f","arguments":{},"namespace":"ns"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.frame)
			if err != nil {
				t.Fatalf("Marshal = %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s; want %s", got, tt.want)
			}
		})
	}
	var f ai.Frame
	if err := json.Unmarshal([]byte(`{"type":"bogus"}`), &f); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("got error %v; want one naming the unknown type", err)
	}
}
