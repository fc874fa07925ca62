package agent

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core/ai"
)

// A recovered partial keeps what an entry may hold: a tool call the
// stream never named is left out, the rest published as it is; a partial
// with nothing else publishes nothing.
func TestPublishableLeavesOutWhatNoStoreReadsBack(t *testing.T) {
	named := ai.ToolCall("c1", "a", json.RawMessage(`{"v":"x"}`))
	unnamed := ai.ToolCall("", "b", json.RawMessage(`{}`))
	whole := &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("so far"), named)}
	if got := publishable(whole); got != whole {
		t.Fatalf("a publishable partial became %+v", got)
	}
	mixed := &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("so far"), unnamed, named)}
	got := publishable(mixed)
	if got == nil || len(got.Content.Blocks) != 2 || got.Content.Blocks[0].Text != "so far" || got.Content.Blocks[1].ID != "c1" {
		t.Fatalf("publishable(%+v) = %+v; want the text and the named call", mixed, got)
	}
	if len(mixed.Content.Blocks) != 3 {
		t.Fatalf("publishable changed its partial: %+v", mixed)
	}
	if _, err := got.Canonical(); err != nil {
		t.Fatalf("what publishable kept an entry may not hold: %v", err)
	}
	if got := publishable(&ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(unnamed)}); got == nil || len(got.Content.Blocks) != 0 {
		t.Fatalf("a partial of an unnamed call alone = %+v; want no blocks (nothing streamed to publish)", got)
	}
	if publishable(nil) != nil {
		t.Fatal("publishable(nil) is not nil")
	}
}
