package storagetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// rejectFixture is committed state every rejection case builds on.
// longBatchAppends is how many list appends a long batch of the reject
// cases writes: more than a batch checker looks up in order.
const longBatchAppends = 40

type rejectFixture struct {
	conv, entry, other, otherEntry ID // two conversations with one entry each
	live, live2, done              ID // two live tasks of conv, one settled
	element                        ID // the one element of list
	list, value, sticky, scratch   storage.Address
}

func newRejectFixture(s *store) *rejectFixture {
	s.t.Helper()
	f := &rejectFixture{}
	x := s.tx()
	f.conv = x.conversation()
	f.entry = x.entry(f.conv, "user")
	f.other = x.conversation()
	f.otherEntry = x.entry(f.other, "user")
	f.live = x.task(f.conv, "generation")
	f.live2 = x.task(f.conv, "tool")
	f.done = x.task(f.conv, "tool")
	f.list = storage.ConversationList[string]("test.list", storage.Rewind).In(f.conv).Address
	f.element = x.push(f.list, "A")
	f.value = storage.ConversationValue[string]("test.value", storage.Rewind).In(f.conv).WithKey("k").Address
	x.set(f.value, "v")
	f.sticky = storage.ConversationValue[string]("test.sticky", storage.Sticky).In(f.conv).Address
	x.set(f.sticky, "s")
	x.commit()
	x = s.tx()
	x.settle(f.done, "done")
	x.commit()
	f.scratch = scratchValue(f.live)
	x = s.scratchTx(f.live)
	x.set(f.scratch, "frame")
	x.commit()
	return f
}

func scratchValue(task ID) storage.Address {
	return storage.ScratchValue[string]("test.frames").In(task).Address
}

// rejectCase is one rule of storage.CheckBatch: a batch that breaks it, the
// index of the offending write (-1 for the batch as a whole) and what the
// rule text must name.
type rejectCase struct {
	name  string
	batch func(s *store, f *rejectFixture) *tx
	index int
	names func(f *rejectFixture, x *tx) []string
	// addressError marks a rule whose underlying error is a malformed address.
	addressError bool
}

func n(id ID) string { return id.String() }

var rejectCases = []rejectCase{
	// The batch as a whole.
	{name: "AMainBatchThatNamesATask", index: -1,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.batchTask = f.live; x.filler(); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"main batch names no task"} }},
	{name: "AScratchBatchOfAnUnknownTask", index: -1,
		batch: func(s *store, f *rejectFixture) *tx { x := s.scratchTx(999); x.set(scratchValue(999), "a"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"unknown task 999"} }},
	{name: "AScratchBatchOfATerminalTask", index: -1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.scratchTx(f.done)
			x.set(scratchValue(f.done), "a")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"terminal task " + n(f.done)} }},
	{name: "AnUnknownBatchKind", index: -1,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.kind = "bulk"; x.filler(); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{`"bulk"`} }},

	// Scopes: main and scratch writes never mix.
	{name: "AScratchBatchWithANonStateWrite", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.scratchTx(f.live)
			x.set(f.scratch, "a")
			x.entry(f.conv, "user")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"only state writes"} }},
	{name: "AScratchBatchThatWritesAnotherTasksScratch", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.scratchTx(f.live)
			x.set(scratchValue(f.live2), "a")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{storage.ScratchScope(f.live2).String()} }},
	{name: "AScratchBatchThatWritesConversationState", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.scratchTx(f.live); x.set(f.value, "a"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{storage.ConversationScope(f.conv).String()} }},
	{name: "AMainBatchThatWritesScratch", index: 1,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.filler(); x.set(f.scratch, "a"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{storage.ScratchScope(f.live).String()} }},

	// State writes.
	{name: "AStateWriteWithoutAnAddress", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteValueSet, Value: js(1)})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"without an address"} }},
	{name: "AMalformedAddress", index: 0, addressError: true,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.set(storage.Address{Scope: storage.ConversationScope(f.conv)}, "a") // no namespace
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"bad address"} }},
	{name: "StateOfAMissingConversation", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.set(storage.ConversationValue[string]("test.value", storage.Rewind).In(999).Address, "a")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation 999"} }},
	{name: "AValueSetWithTheOtherRewindPolicy", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			a := f.value
			a.Rewind = false
			x.set(a, "a")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{f.value.StateKey(), "rewind"} }},
	{name: "AStickyValueSetAsRewindable", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			a := f.sticky
			a.Rewind = true
			x.set(a, "a")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{f.sticky.StateKey(), "rewind"} }},
	{name: "AValueSetOnAListAddress", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.set(f.list, "a"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{f.list.StateKey(), "list"} }},
	{name: "AListAppendOnAValueAddress", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.push(f.value, "a"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{f.value.StateKey(), "value"} }},
	{name: "AValueThatIsNotJSON", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteValueSet, Addr: addrPtr(f.value), Value: json.RawMessage("{")})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"not valid JSON"} }},
	{name: "AnElementThatIsNotJSON", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteListAppend, Addr: addrPtr(f.list), Value: json.RawMessage("nope")})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"not valid JSON"} }},
	{name: "AValueSetWithoutAValue", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteValueSet, Addr: addrPtr(f.value)})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"not valid JSON"} }},
	{name: "RemovingAnElementThatIsNotInTheList", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.remove(f.list, f.entry); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"element " + n(f.entry), f.list.String()} }},
	{name: "RemovingAnElementTwice", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.remove(f.list, f.element)
			x.remove(f.list, f.element)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"element " + n(f.element), f.list.String()} }},
	{name: "RemovingAnElementAfterAClear", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.clear(f.list)
			x.remove(f.list, f.element)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"element " + n(f.element), f.list.String()} }},
	// A conversation the batch creates has an empty list, even under the
	// name of a list another conversation holds.
	{name: "RemovingAnElementFromTheListOfAConversationTheBatchCreates", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			c := x.conversation()
			x.remove(storage.ConversationList[string]("test.list", storage.Rewind).In(c).Address, f.element)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"element " + n(f.element), "test.list"} }},
	// A batch that touches more elements than a checker keeps in order
	// (storage's batchMap): what it appended and removed before a clear is
	// gone after it, and stays so.
	{name: "RemovingAnElementAppendedBeforeAClearInALongBatch", index: longBatchAppends + 2,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			for i := range longBatchAppends {
				x.push(f.list, i)
			}
			x.remove(f.list, x.first+1)
			x.clear(f.list)
			x.remove(f.list, x.first+2)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"element " + n(x.first+2), f.list.String()} }},

	// Conversations.
	{name: "ACreateConversationWithoutARecord", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteCreateConversation})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"without a conversation"} }},
	{name: "AConversationIDThatIsNotItsSequence", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.filler()
			x.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: x.next() + 1}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"conversation id " + n(x.first+2), "sequence " + n(x.first+1)}
		}},
	{name: "AForkOfAMissingConversation", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.fork(999, f.entry); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation 999"} }},
	{name: "AForkAtAnEntryOfAnotherConversation", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.fork(f.conv, f.otherEntry); return x },
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"fork point " + n(f.otherEntry), "conversation " + n(f.conv)}
		}},
	{name: "AForkAtAnEntryThatDoesNotExist", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.fork(f.conv, 999); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"fork point 999"} }},
	{name: "AForkAtAnEntryOfAnotherConversationWrittenInTheSameBatch", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			e := x.entry(f.other, "user")
			x.fork(f.conv, e)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"fork point " + n(x.first), "conversation " + n(f.conv)}
		}},
	{name: "AnOwnerTaskThatDoesNotExist", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.ownedConversation(999); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"task 999"} }},
	{name: "DeletingAMissingConversation", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.deleteConversation(999); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation 999"} }},
	{name: "DeletingAConversationTwice", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.deleteConversation(f.other)
			x.deleteConversation(f.other)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation " + n(f.other)} }},

	// Entries.
	{name: "AnEntryWriteWithoutAnEntry", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteEntry})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"without an entry"} }},
	{name: "AnEntryIDThatIsNotItsSequence", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: x.next() + 1, ConversationID: f.conv, Kind: "user"}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"entry id " + n(x.first+1), "sequence " + n(x.first)}
		}},
	{name: "AnEntryWithoutAKind", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"entry " + n(x.first), "no kind"} }},
	{name: "AnEntryInAMissingConversation", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.entry(999, "user"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation 999"} }},
	{name: "AnEntryInAConversationDeletedEarlierInTheBatch", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.deleteConversation(f.other)
			x.entry(f.other, "user")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation " + n(f.other)} }},
	{name: "EntryDataThatIsNotJSON", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "user", Data: json.RawMessage("{")})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"entry " + n(x.first), "not valid JSON"} }},
	// A message held as given must be what a store reads back from disk.
	{name: "AnEntryWhoseCallArgumentsAreSpaced", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			m := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("c1", "f", json.RawMessage(`{"a": 1}`)))}
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "assistant", Model: []ai.Message{m}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"entry " + n(x.first), "model message 0", "block 0's arguments is not as json.Marshal writes it"}
		}},
	{name: "AnEntryWhoseMessageHasAnUnknownRole", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "user", Model: []ai.Message{{Role: "robot"}}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"entry " + n(x.first), "model message 0", `unknown message role "robot"`}
		}},
	{name: "AnEntryWithAnEmptyModel", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "user", Model: []ai.Message{}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"entry " + n(x.first), "empty model"} }},
	{name: "AnEditWithEmptyMessages", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "summary", Edits: []storage.ContextEdit{{Target: f.entry, Action: storage.EditReplace, Messages: []ai.Message{}}}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"entry " + n(x.first), "edit of " + n(f.entry), "empty messages"}
		}},
	{name: "AHeadAfterItsEntry", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.head(f.conv, "reset", x.next()+1); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"entry " + n(x.first), "head " + n(x.first+1)} }},
	{name: "ANegativeHead", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.head(f.conv, "reset", -1); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"entry " + n(x.first), "head -1"} }},
	{name: "AnEditOfItsOwnEntry", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "notice",
				Edits: []storage.ContextEdit{{Target: x.next(), Action: storage.EditOmit}}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"edits " + n(x.first)} }},
	{name: "AnEditWithAnUnknownAction", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "notice",
				Edits: []storage.ContextEdit{{Target: f.entry, Action: "shorten"}}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"edit of " + n(f.entry), `"shorten"`} }},
	{name: "AnEntryByAnUnknownTask", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.entryWith(storage.Entry{ConversationID: f.conv, Kind: "user", ByTaskID: 999})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"unknown task 999"} }},

	// Task creation.
	{name: "ATaskWriteWithoutATask", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteTask})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"without a task"} }},
	{name: "ATaskIDThatIsNotItsSequence", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: x.next() + 1, ConversationID: f.conv,
				Kind: "job", Status: "pending", Role: storage.RoleStart}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"task id " + n(x.first+1), "sequence " + n(x.first)}
		}},
	{name: "ATaskWithoutAKind", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Status: "pending", Role: storage.RoleStart})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(x.first), "kind"} }},
	{name: "ATaskWithoutAStatus", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Role: storage.RoleStart})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(x.first), "status"} }},
	{name: "ATaskWithAnUnknownRole", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: "sleeping"})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(x.first), `"sleeping"`} }},
	{name: "ATaskCreatedTerminal", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "done", Role: storage.RoleTerminal})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(x.first), "terminal"} }},
	{name: "TaskStateThatIsNotJSON", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: storage.RoleStart,
				State: json.RawMessage("{")})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(x.first), "not valid JSON"} }},
	{name: "ATaskWithAnEmptyState", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: storage.RoleStart, State: json.RawMessage{}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(x.first), "empty state"} }},
	{name: "ATaskInAMissingConversation", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.task(999, "job"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"conversation 999"} }},
	{name: "ATaskThatDependsOnItself", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: storage.RoleStart,
				After: []ID{x.next()}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"task " + n(x.first), "depends on " + n(x.first)}
		}},
	{name: "ATaskThatDependsOnANonTask", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: storage.RoleStart,
				After: []ID{f.entry}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"unknown task " + n(f.entry)} }},
	// Ownership claims are checked once the whole batch is known (a task may
	// list a conversation the batch creates later), so they reject the batch
	// as a whole.
	{name: "ATaskThatOwnsAMissingConversation", index: -1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: storage.RoleStart,
				Owns: []ID{999}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"task " + n(x.first), "unknown conversation 999"}
		}},
	{name: "ATaskThatListsAConversationOwnedByAnotherTask", index: -1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			owned := x.ownedConversation(f.live2)
			x.taskWith(storage.Task{ConversationID: f.conv, Kind: "job", Status: "pending", Role: storage.RoleStart,
				Owns: []ID{owned}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"task " + n(x.first+1), "conversation " + n(x.first), "owner is " + n(f.live2)}
		}},

	// Task changes.
	{name: "PatchingAMissingTask", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.patch(999, "running", storage.RoleInflight)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task 999"} }},
	{name: "PatchingATerminalTask", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.patch(f.done, "running", storage.RoleInflight)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(f.done), "terminal"} }},
	{name: "SettlingATerminalTask", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.settle(f.done, "done"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(f.done), "terminal"} }},
	{name: "SettlingATaskTwiceInOneBatch", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.settle(f.live, "done")
			x.settle(f.live, "done")
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(f.live), "terminal"} }},
	{name: "PatchStateThatIsNotJSON", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WritePatch, ID: f.live, State: json.RawMessage("{")})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"task " + n(f.live), "not valid JSON"} }},
	{name: "PatchingOwnsToEmpty", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WritePatch, ID: f.live, Owns: []ID{}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"patch of task " + n(f.live), "empty owns"} }},
	{name: "SettlingWithAnEmptyState", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteSettle, ID: f.live, Status: "done", Role: storage.RoleTerminal, State: json.RawMessage{}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"settle of task " + n(f.live), "empty state"} }},
	{name: "SettlingWithoutTheTerminalRole", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteSettle, ID: f.live, Status: "done", Role: storage.RoleInflight})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"settle of task " + n(f.live)} }},
	{name: "SettlingWithoutAStatus", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WriteSettle, ID: f.live, Role: storage.RoleTerminal})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"settle of task " + n(f.live)} }},
	{name: "PatchingAStatusWithoutARole", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WritePatch, ID: f.live, Status: "streaming"})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"patch of task " + n(f.live), "together"} }},
	{name: "PatchingToTheTerminalRole", index: 0,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.patch(f.live, "done", storage.RoleTerminal)
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{"patch of task " + n(f.live), "settle"} }},
	{name: "PatchingToAnUnknownRole", index: 0,
		batch: func(s *store, f *rejectFixture) *tx { x := s.tx(); x.patch(f.live, "zzz", "sleeping"); return x },
		names: func(f *rejectFixture, x *tx) []string { return []string{"patch of task " + n(f.live), `"sleeping"`} }},
	{name: "PatchingOwnsWithAMissingConversation", index: -1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WritePatch, ID: f.live, Owns: []ID{999}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"task " + n(f.live), "unknown conversation 999"}
		}},
	{name: "PatchingOwnsWithAConversationTheTaskDoesNotOwn", index: -1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.add(storage.Write{Type: storage.WritePatch, ID: f.live, Owns: []ID{f.other}})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string {
			return []string{"task " + n(f.live), "conversation " + n(f.other), "owner is 0"}
		}},
	{name: "AnUnknownWriteType", index: 1,
		batch: func(s *store, f *rejectFixture) *tx {
			x := s.tx()
			x.filler()
			x.add(storage.Write{Type: "entry.patch", ID: f.entry})
			return x
		},
		names: func(f *rejectFixture, x *tx) []string { return []string{`"entry.patch"`} }},
}

// testRejections: every rule of storage.CheckBatch rejects with a
// *storage.BatchError that points at the offending write and names what it
// got wrong; the store is exactly as it was, and the next good batch gets the
// numbers the rejected one would have had.
func testRejections(t *testing.T, open Opener) {
	for _, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, open)
			f := newRejectFixture(s)
			values := []storage.Address{f.value, f.sticky, f.scratch, fillerAddr}
			lists := []storage.Address{f.list}
			before := s.snapshot(values, lists)

			x := tc.batch(s, f)
			be := x.reject()
			if be.Index != tc.index {
				t.Errorf("Index = %d; want %d (%v)", be.Index, tc.index, be)
			}
			if tc.index >= 0 && tc.index < len(x.writes) {
				if want := x.first + ID(tc.index); be.Seq != want {
					t.Errorf("Seq = %d; want %d", be.Seq, want)
				}
				if want := x.writes[tc.index].Type; be.Type != want {
					t.Errorf("Type = %q; want %q", be.Type, want)
				}
			}
			for _, name := range tc.names(f, x) {
				if !strings.Contains(be.Rule, name) {
					t.Errorf("Rule = %q; want it to name %q", be.Rule, name)
				}
			}
			if tc.addressError {
				var ae *storage.AddressError
				if !errors.As(be, &ae) {
					t.Errorf("error %v does not wrap a *storage.AddressError", be)
				}
			}

			if diff := cmp.Diff(before, s.snapshot(values, lists), cmpOpts...); diff != "" {
				t.Fatalf("a rejected batch changed the store (-before +after):\n%s", diff)
			}
			good := s.tx()
			good.filler()
			if r := good.commit(); r.First != before.LastSeq+1 {
				t.Errorf("the next good batch starts at %d; want %d", r.First, before.LastSeq+1)
			}
		})
	}
}
