package agent

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
)

// blockValue builds what delta.ValueOf gives for every block: any type,
// empty and escaped and non-UTF-8 text, arguments empty, spaced, nested or
// not JSON at all.
func TestBlockValueIsValueOf(t *testing.T) {
	str := rapid.SampledFrom([]string{"", "a", "é😀", "<&>\u2028", "quote\"\\", "\x00\n", "\xff", "a\xc0b"})
	rapid.Check(t, func(t *rapid.T) {
		b := ai.Block{
			Type: ai.BlockType(rapid.SampledFrom([]string{"text", "thinking", "image", "toolCall", "other", "\xfe"}).Draw(t, "type")),
			Text: str.Draw(t, "text"), TextSignature: str.Draw(t, "textSig"), Thinking: str.Draw(t, "thinking"),
			ThinkingSignature: str.Draw(t, "thinkingSig"), Redacted: rapid.Bool().Draw(t, "redacted"),
			Data: str.Draw(t, "data"), MimeType: str.Draw(t, "mime"), ID: str.Draw(t, "id"), Name: str.Draw(t, "name"),
			ThoughtSignature: str.Draw(t, "thought"), Namespace: str.Draw(t, "ns"),
			Arguments: json.RawMessage(rapid.SampledFrom([]string{"", `{}`, ` { "v" : [1, 2.50, null] } `, `{"<":"\u2028"}`, `[1,`, `nul`, `"s"`}).Draw(t, "args")),
		}
		want, wantErr := delta.ValueOf(b)
		got, err := blockValue(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("blockValue(%#v) failed with %v; ValueOf with %v", b, err, wantErr)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("blockValue(%#v) (-ValueOf +blockValue):\n%s", b, cmp.Diff(want, got))
		}
	})
}
