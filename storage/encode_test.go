package storage_test

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// AppendWrites writes what json.Marshal writes of the same writes, after
// whatever buf held; the JSONL store's line tests hold it to json.Marshal
// over random and golden batches too.
func TestAppendWritesWritesWhatJSONMarshalWrites(t *testing.T) {
	a := storage.ConversationValue[int]("n<s", storage.Rewind).In(1).WithKey("k&\u2028").Address
	s := storage.ScratchList[string]("frames").In(7).Address
	for _, ws := range [][]storage.Write{
		nil,
		{},
		{{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(` { "a" : "<b>" } `)}},
		{{Type: storage.WriteListAppend, Addr: &s, Value: json.RawMessage(`"f"`)}, {Type: storage.WriteListRemove, Addr: &s, Element: 3}},
		{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 2, Parent: &storage.ParentRef{ConversationID: 1, At: 9}, Owner: 4}}},
		{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: "assistant", ByTaskID: 4, Key: "x", Data: json.RawMessage(`{"n":1}`),
			Model: []ai.Message{ai.UserText("hi", 1)}, Head: 2,
			Edits: []storage.ContextEdit{{Target: 3, Action: storage.EditReplace, Messages: []ai.Message{ai.UserText("é", 2)}}}}}},
		{{Type: storage.WriteTask, Task: &storage.Task{ID: 6, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart, State: json.RawMessage(`[1]`), After: []storage.ID{2}, Background: true, Owns: []storage.ID{3}, Abort: true}}},
		{{Type: storage.WriteSettle, ID: 6, Status: "done", Role: storage.RoleTerminal, State: json.RawMessage(`{}`), Abort: true, Owns: []storage.ID{8}}},
	} {
		want, err := json.Marshal(ws)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := storage.AppendWrites([]byte("prefix"), ws)
		if !ok || string(got) != "prefix"+string(want) {
			t.Errorf("AppendWrites = %s, %t\njson.Marshal writes\n%s", got, ok, want)
		}
	}
}

// What json.Marshal fails on, AppendWrites reports it cannot write, and
// what buf held is still there.
func TestAppendWritesGivesUpWhereJSONMarshalFails(t *testing.T) {
	bad := storage.Address{Namespace: "n"} // a scope of no kind
	ws := []storage.Write{{Type: storage.WriteValueSet, Addr: &bad, Value: json.RawMessage(`1`)}}
	if _, err := json.Marshal(ws); err == nil {
		t.Fatal("json.Marshal writes a scope of no kind; the test needs a value it refuses")
	}
	got, ok := storage.AppendWrites([]byte("prefix"), ws)
	if ok || string(got) != "prefix" {
		t.Fatalf("AppendWrites of a scope of no kind = %q, %t; want the prefix alone and false", got, ok)
	}
}
