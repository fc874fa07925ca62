package memory_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// FuzzCommitValidation feeds arbitrary batches (as JSON) to a store that
// already holds a small session. Whatever the bytes, Commit must not panic,
// and a rejected batch must leave the store exactly as it was.
func FuzzCommitValidation(f *testing.F) {
	seeds := []string{
		`{"kind":"main","writes":[{"type":"entry","entry":{"id":5,"conversationId":1,"kind":"user"}}]}`,
		`{"kind":"main","writes":[{"type":"patch","id":2,"status":"running","role":"inflight"}]}`,
		`{"kind":"main","writes":[{"type":"settle","id":2,"status":"done","role":"terminal","state":{}}]}`,
		`{"kind":"scratch","task":2,"writes":[{"type":"list.append","addr":{"scope":{"scratch":2},"namespace":"f"},"value":1}]}`,
		`{"kind":"main","writes":[{"type":"createConversation","conversation":{"id":5,"parent":{"conversationId":1,"at":3}}}]}`,
		`{"kind":"main","writes":[{"type":"list.remove","addr":{"scope":{"conversation":1},"namespace":"l","rewind":true},"element":4}]}`,
		`{"kind":"main","writes":[{"type":"task","task":{"id":5,"conversationId":1,"kind":"k","status":"s","role":"start","after":[2],"owns":[1]}}]}`,
		`{"kind":"bogus","writes":[]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var batch storage.CommitBatch
		if json.Unmarshal(data, &batch) != nil {
			return
		}
		ctx := context.Background()
		s := memory.New()
		base := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
			{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart}},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user"}},
			{Type: storage.WriteListAppend, Addr: &storage.Address{Scope: storage.ConversationScope(1), Namespace: "l", Rewind: true}, Value: json.RawMessage(`"x"`)},
		}}
		if _, err := s.Commit(ctx, base); err != nil {
			t.Fatal(err)
		}
		before := snapshotOf(t, s)
		if _, err := s.Commit(ctx, batch); err != nil {
			if after := snapshotOf(t, s); after != before {
				t.Fatalf("a rejected batch changed the store:\nbefore %s\nafter  %s", before, after)
			}
		}
	})
}

// snapshotOf renders what the fuzz session can hold, for equality checks.
func snapshotOf(t *testing.T, s *memory.Store) string {
	ctx := context.Background()
	lim := storage.Cursor{Limit: storage.PageLimitMax}
	convs, _ := s.ScanConversations(ctx, storage.ConversationQuery{Cursor: lim})
	entries, _ := s.ScanEntries(ctx, storage.EntryQuery{Cursor: lim, ConversationID: 1})
	tasks, _ := s.ScanTasks(ctx, storage.TaskQuery{Cursor: lim})
	list, _ := s.ReadList(ctx, storage.Address{Scope: storage.ConversationScope(1), Namespace: "l", Rewind: true}, storage.ListQuery{Cursor: lim})
	out, err := json.Marshal([]any{s.LastSeq(), convs, entries, tasks, list})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
