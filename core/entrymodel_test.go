package core_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
)

// An entry's messages are committed as every store reads them back: raw
// values a provider sent spaced, or with characters encoding/json
// escapes, are stored as json.Marshal writes them, so memory answers what
// a JSONL file gives once reopened cold; the caller's message is left
// alone.
func TestEntryModelsAreStoredAsAStoreReadsThemBack(t *testing.T) {
	ctx := context.Background()
	spaced := ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopToolUse, Content: ai.Blocks(
		ai.Text("calling"), ai.ToolCall("c1", "f", json.RawMessage(`{"a": "<b>", "n": [1, 2.50]}`)))}
	const want = `{"a":"\u003cb\u003e","n":[1,2.50]}`
	commit := func(store storage.Storage) []*storage.Entry {
		kinds := core.NewKinds()
		line := core.NewLine(core.RealRuntime(), store, kinds, core.LineOptions{})
		if _, err := line.Commit(ctx, func(tx *core.Tx) error {
			conv := tx.CreateConversation(core.ConversationSpec{})
			core.AppendAssistant(tx, conv, spaced)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return entriesOf(t, store)
	}
	mem := commit(memory.New())
	if got := string(mem[0].Model[0].Content.Blocks[1].Arguments); got != want {
		t.Fatalf("memory stored the arguments %s; want %s", got, want)
	}
	if got := string(spaced.Content.Blocks[1].Arguments); got != `{"a": "<b>", "n": [1, 2.50]}` {
		t.Fatalf("the caller's arguments became %s", got)
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	store, err := jsonl.Open(ctx, path, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := commit(store)
	if err := store.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cold, err := jsonl.Open(ctx, path, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close(ctx)
	for name, got := range map[string][]*storage.Entry{"a live JSONL store": live, "a cold JSONL store": entriesOf(t, cold)} {
		if diff := cmp.Diff(mem, got); diff != "" {
			t.Errorf("%s answers otherwise than memory (-memory +%s):\n%s", name, name, diff)
		}
	}
}

// entriesOf is every entry of the store's first conversation.
func entriesOf(t *testing.T, store storage.Storage) []*storage.Entry {
	t.Helper()
	p, err := store.ScanEntries(context.Background(), storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p.Items
}

// A message no store could read back is refused with the entry's id and
// what is wrong, and nothing is written.
func TestEntryModelsThatWouldNotReadBackAreRefused(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	for _, tc := range []struct {
		name string
		m    ai.Message
		says string
	}{
		{"arguments that are not JSON", ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("c1", "f", json.RawMessage(`{"a":`)))}, "block 0's arguments is not JSON"},
		{"an unknown role", ai.Message{Role: "robot", Content: ai.Blocks(ai.Text("beep"))}, `unknown message role "robot"`},
		{"a tool call without an id", ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("", "f", nil))}, "toolCall block without id"},
		{"a tool result without its call", ai.Message{Role: ai.RoleToolResult, Content: ai.Blocks(ai.Text("out"))}, "toolResult message without toolCallId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			next := f.store.LastSeq() + 1
			ce := f.reject(core.RuleBadPayload, func(tx *core.Tx) { core.AppendAssistant(tx, conv, tc.m) })
			if ce.ID != next || !strings.Contains(ce.Error(), "entry model message 0") || !strings.Contains(ce.Error(), tc.says) {
				t.Fatalf("refused with %v (id %d); want entry %d's model message 0 named, saying %q", ce, ce.ID, next, tc.says)
			}
		})
	}
	f.t = t
	f.assistant(conv, "still fine") // the line goes on
}
