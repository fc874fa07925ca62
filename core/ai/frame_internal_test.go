package ai

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

var frameTypes = []FrameType{
	FrameStart, FrameTextStart, FrameTextDelta, FrameTextEnd, FrameThinkingStart, FrameThinkingDelta, FrameThinkingEnd,
	FrameToolCallStart, FrameToolCallCheckpoint, FrameToolCallDelta, FrameToolCallEnd, "", "odd<&>",
}

// frameStrings are strings with each escape encoding/json writes.
var frameStrings = []string{"", "x", "two words", `{"a":`, "q\"b\\", "\n\t\x01", "<&>", "é😀", "\u2028", "\xff"}

// genFrame draws a frame of any type, with the fields AppendJSON writes
// by hand and, now and then, one that sends it to encoding/json.
func genFrame(t *rapid.T) Frame {
	str := func(label string) string {
		return frameStrings[rapid.IntRange(0, len(frameStrings)-1).Draw(t, label)]
	}
	f := Frame{
		Type:         frameTypes[rapid.IntRange(0, len(frameTypes)-1).Draw(t, "type")],
		ContentIndex: rapid.IntRange(-1, 1<<40).Draw(t, "index"),
		EndContent:   str("end"), Delta: str("delta"), TextSignature: str("textSig"), ThinkingSignature: str("thinkingSig"),
		Redacted: rapid.Bool().Draw(t, "redacted"), JSON: str("json"), ID: str("id"), Name: str("name"),
		ThoughtSignature: str("thoughtSig"), Namespace: str("namespace"),
	}
	switch rapid.IntRange(0, 5).Draw(t, "partial") {
	case 0:
		f.Partial = &Message{Role: RoleAssistant, Content: Blocks(), Timestamp: 1}
	case 1:
		m := genMessage(t) // now and then one written through encoding/json
		f.Partial = &m
	}
	if rapid.Bool().Draw(t, "content") {
		b := genAnyBlock(t)
		f.Content = &b
	}
	if rapid.Bool().Draw(t, "toolCall") {
		b := genAnyBlock(t)
		f.ToolCall = &b
	}
	f.Arguments = genArguments(t)
	return f
}

var blockTypes = []BlockType{BlockText, BlockThinking, BlockImage, BlockToolCall, "", "odd\""}

// genAnyBlock draws a block of any type with any of its fields set, well
// formed or not.
func genAnyBlock(t *rapid.T) Block {
	str := func(label string) string {
		if rapid.Bool().Draw(t, label+"Set") {
			return ""
		}
		return frameStrings[rapid.IntRange(0, len(frameStrings)-1).Draw(t, label)]
	}
	return Block{
		Type: blockTypes[rapid.IntRange(0, len(blockTypes)-1).Draw(t, "type")],
		Text: str("text"), TextSignature: str("textSig"), Thinking: str("thinking"), ThinkingSignature: str("thinkingSig"),
		Redacted: rapid.Bool().Draw(t, "redacted"), Data: str("data"), MimeType: str("mime"), ID: str("id"), Name: str("name"),
		Arguments: genArguments(t), ThoughtSignature: str("thoughtSig"), Namespace: str("namespace"),
	}
}

// frameArguments are raw arguments: none, compact, and ones encoding/json
// rewrites or refuses.
var frameArguments = []string{"", "", `{}`, `{"a":1}`, `{"a": 1}`, `{"a":"<b>"}`, "{\"a\":\"\u2028\"}", `{"a":"é"}`, `[1,2]`, `{"a":`, `null`}

func genArguments(t *rapid.T) json.RawMessage {
	if a := frameArguments[rapid.IntRange(0, len(frameArguments)-1).Draw(t, "arguments")]; a != "" {
		return json.RawMessage(a)
	}
	return nil
}

// The blocks written by hand are the bytes encoding/json writes.
func TestBlockAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, b Block) {
		want, wantErr := b.marshalReflect()
		got, err := b.AppendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) || err == nil && string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJSON(%#v) = %s, %v; reflection writes %s, %v", b, got, err, want, wantErr)
		}
	}
	for _, typ := range blockTypes {
		for _, args := range frameArguments {
			check(t, Block{Type: typ, Arguments: json.RawMessage(args)})
			check(t, Block{Type: typ, Text: "t", Thinking: "k", ID: "i", Arguments: json.RawMessage(args)})
		}
	}
	rapid.Check(t, func(t *rapid.T) { check(t, genAnyBlock(t)) })
}

// The frames written by hand are the bytes json.Marshal writes through
// the wire form, for every type and every escape.
func TestFrameAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, f Frame) {
		want, wantErr := f.marshalReflect()
		got, err := f.AppendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) || err == nil && string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJSON(%#v) = %s, %v; reflection writes %s, %v", f, got, err, want, wantErr)
		}
		if wantErr != nil {
			return
		}
		// json.Marshal of a frame goes through MarshalJSON: the same bytes.
		if out, err := json.Marshal(f); err != nil || string(out) != string(want) {
			t.Fatalf("json.Marshal(%#v) = %s, %v; want %s", f, out, err, want)
		}
	}
	for _, typ := range frameTypes {
		for _, s := range frameStrings {
			check(t, Frame{Type: typ, ContentIndex: 3, EndContent: s, Delta: s, TextSignature: s, ThinkingSignature: s,
				Redacted: true, JSON: s, ID: s, Name: s, ThoughtSignature: s, Namespace: s})
			check(t, Frame{Type: typ, Delta: s})
		}
	}
	rapid.Check(t, func(t *rapid.T) { check(t, genFrame(t)) })
}

// Any text in a frame's strings and arguments, and in its block's, is
// written by hand as encoding/json writes it.
func FuzzFrameEncoding(f *testing.F) {
	f.Add("text_delta", "hello", []byte(`{"a":1}`), "text")
	f.Add("toolcall_end", "<\u2028\xff", []byte(`{"a": "<"}`), "toolCall")
	f.Add("text_start", "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, typ, s string, args []byte, blockType string) {
		b := Block{Type: BlockType(blockType), Text: s, Name: s, Arguments: args}
		if want, err := b.marshalReflect(); err == nil {
			if got, err := b.AppendJSON(nil); err != nil || string(got) != string(want) {
				t.Fatalf("block %#v: AppendJSON = %s, %v; reflection writes %s", b, got, err, want)
			}
		}
		fr := Frame{Type: FrameType(typ), Delta: s, EndContent: s, JSON: s, Arguments: args, Content: &b, ToolCall: &b}
		want, err := fr.marshalReflect()
		if err != nil {
			return
		}
		if got, err := fr.AppendJSON(nil); err != nil || string(got) != string(want) {
			t.Fatalf("frame %#v: AppendJSON = %s, %v; reflection writes %s", fr, got, err, want)
		}
	})
}
