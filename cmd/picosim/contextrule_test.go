package main

import (
	"context"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// On transcripts drawn at random (forks of forks at any entry, heads at any
// boundary, edits omitting and replacing any earlier entry, edits of edits)
// the rule and the harness derive the same context for every conversation
// at every target: the oracle's rule is the design's, and the harness's
// derivation (core.DeriveContext over the memory store's fork-aware reads)
// keeps it.
func TestTheContextRuleAgreesWithTheHarnessOnDrawnTranscripts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		store := memory.New()
		commit := func(w storage.Write) storage.ID {
			r, err := store.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}})
			if err != nil {
				t.Fatalf("commit %s: %v", w.Type, err)
			}
			return r.First
		}
		convs := []storage.ID{commit(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}})}
		visible := func(conv storage.ID) []storage.ID {
			page, err := store.ScanEntries(ctx, storage.EntryQuery{ConversationID: conv, Cursor: storage.Cursor{Limit: storage.PageLimitMax}})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]storage.ID, len(page.Items))
			for i, e := range page.Items {
				ids[i] = e.ID
			}
			return ids
		}
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			conv := convs[rapid.IntRange(0, len(convs)-1).Draw(t, "conv")]
			seen := visible(conv)
			next := store.LastSeq() + 1
			e := &storage.Entry{ID: next, ConversationID: conv, Kind: "user", Model: []ai.Message{ai.UserText(strings.Repeat("m", i%3+1), int64(i))}}
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); {
			case op == 0 && len(seen) > 0:
				at := seen[rapid.IntRange(0, len(seen)-1).Draw(t, "at")]
				convs = append(convs, commit(storage.Write{Type: storage.WriteCreateConversation,
					Conversation: &storage.Conversation{ID: next, Parent: &storage.ParentRef{ConversationID: conv, At: at}}}))
				continue
			case op == 1:
				e.Kind, e.Head = "reset", next
				if len(seen) > 0 && rapid.Bool().Draw(t, "earlierBoundary") {
					e.Head = seen[rapid.IntRange(0, len(seen)-1).Draw(t, "boundary")]
				}
				if rapid.Bool().Draw(t, "noModel") {
					e.Model = nil
				}
			case op == 2 && len(seen) > 0:
				for range rapid.IntRange(1, 2).Draw(t, "edits") {
					ed := storage.ContextEdit{Target: seen[rapid.IntRange(0, len(seen)-1).Draw(t, "target")], Action: storage.EditOmit}
					if rapid.Bool().Draw(t, "replace") {
						ed.Action, ed.Messages = storage.EditReplace, []ai.Message{ai.UserText("replaced", int64(i))}
					}
					e.Edits = append(e.Edits, ed)
				}
				e.Kind = "notice"
			}
			commit(storage.Write{Type: storage.WriteEntry, Entry: e})
		}
		convList, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
			return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
		})
		if err != nil {
			t.Fatal(err)
		}
		rule, err := readTranscripts(ctx, store, convList)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range convs {
			for through := storage.ID(1); through <= store.LastSeq(); through++ {
				if p := contextRuleProblem(ctx, store, rule, c, through); p != "" {
					t.Fatal(p)
				}
			}
		}
	})
}
