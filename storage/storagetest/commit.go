package storagetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/storage"
)

var commitTests = []test{
	{"WriteIGetsLastSeqPlusOnePlusI", testCommitNumbering},
	{"AnEmptyBatchWritesNothing", testEmptyBatch},
	{"EarlierWritesOfTheSameBatchCount", testSameBatchReferences},
	{"ARejectedBatchConsumesNoIDs", testRejectedBatchConsumesNoIDs},
	{"PagesAreReadAtLastSeq", testPagesReadAt},
	{"EmptyPagesEncodeItemsAsAJSONArray", testEmptyPagesEncodeArrays},
	{"AClosedStoreFailsWithErrClosed", testClosed},
	{"APatchChangesOnlyWhatItCarries", testPatchMerges},
}

// testPatchMerges: a patch or settle replaces what it carries (status and
// role together, state, owns) and sets the abort mark; the rest of the task
// stays as stored, each step read back in its own commit.
func testPatchMerges(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	task := x.taskWith(storage.Task{ConversationID: c, Kind: "tool", Status: "pending", Role: storage.RoleStart, State: js("s0"), Background: true})
	x.commit()
	want := storage.Task{ID: task, ConversationID: c, Kind: "tool", Status: "pending", Role: storage.RoleStart, State: js("s0"), Background: true}
	x = s.tx()
	owned := x.ownedConversation(task)
	x.commit()
	for _, step := range []struct {
		name  string
		write storage.Write
		apply func(*storage.Task)
	}{
		{"abort mark", storage.Write{Type: storage.WritePatch, ID: task, Abort: true}, func(t *storage.Task) { t.Abort = true }},
		{"status", storage.Write{Type: storage.WritePatch, ID: task, Status: "running", Role: storage.RoleInflight},
			func(t *storage.Task) { t.Status, t.Role = "running", storage.RoleInflight }},
		{"claim", storage.Write{Type: storage.WritePatch, ID: task, Owns: []ID{owned}}, func(t *storage.Task) { t.Owns = []ID{owned} }},
		{"state", storage.Write{Type: storage.WritePatch, ID: task, State: js("s1")}, func(t *storage.Task) { t.State = js("s1") }},
		{"settle without state", storage.Write{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal},
			func(t *storage.Task) { t.Status, t.Role = "done", storage.RoleTerminal }},
	} {
		x = s.tx()
		x.add(step.write)
		x.commit()
		step.apply(&want)
		if got := s.getTasks(task)[task]; got == nil || !cmp.Equal(*got, want) {
			t.Fatalf("after the %s patch the task is %+v; want %+v", step.name, got, want)
		}
	}
}

// testCommitNumbering spells out the numbers instead of using the tx
// builder, which computes them the same way.
func testCommitNumbering(t *testing.T, open Opener) {
	s := newStore(t, open)
	conv := storage.ConversationScope(1)
	list := storage.Address{Scope: conv, Namespace: "test.list", Rewind: true}
	first := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteListAppend, Addr: &list, Value: js("A")},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user"}},
	}}
	r, err := s.Commit(s.ctx, first)
	if err != nil {
		t.Fatalf("Commit(first): %v", err)
	}
	if want := (storage.Range{First: 1, Last: 3}); r != want {
		t.Errorf("first batch range = %+v; want %+v", r, want)
	}
	second := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteTask, Task: &storage.Task{ID: 4, ConversationID: 1, Kind: "generation", Status: "pending", Role: storage.RoleStart}},
		{Type: storage.WriteListAppend, Addr: &list, Value: js("B")},
	}}
	if r, err = s.Commit(s.ctx, second); err != nil {
		t.Fatalf("Commit(second): %v", err)
	}
	if want := (storage.Range{First: 4, Last: 5}); r != want {
		t.Errorf("second batch range = %+v; want %+v", r, want)
	}
	if got := s.LastSeq(); got != 5 {
		t.Errorf("LastSeq() = %d; want 5", got)
	}
	if got := s.getConversations(1); got[1].ID != 1 {
		t.Errorf("conversation 1 = %+v; want id 1", got[1])
	}
	if got := s.transcript(1); !cmp.Equal(got, []ID{3}) {
		t.Errorf("transcript(1) = %v; want [3]", got)
	}
	if got := s.getTasks(4); got[4] == nil || got[4].ID != 4 {
		t.Errorf("task 4 = %+v; want id 4", got[4])
	}
	if got, want := s.elementIDs(list, 0), []ID{2, 5}; !cmp.Equal(got, want) {
		t.Errorf("list element ids = %v; want the sequences of their appends %v", got, want)
	}
}

func testEmptyBatch(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.entry(c, "user")
	x.commit()
	before := s.snapshot(nil, nil)

	r, err := s.Commit(s.ctx, storage.CommitBatch{Kind: storage.BatchMain})
	if err != nil {
		t.Fatalf("Commit(empty): %v", err)
	}
	if want := (storage.Range{First: 3, Last: 2}); r != want {
		t.Errorf("empty batch range = %+v; want %+v", r, want)
	}
	if diff := cmp.Diff(before, s.snapshot(nil, nil), cmpOpts...); diff != "" {
		t.Errorf("an empty batch changed the store (-before +after):\n%s", diff)
	}
	x = s.tx()
	if got := x.entry(c, "user"); got != 3 {
		t.Fatalf("the next write is numbered %d; want 3", got)
	}
	x.commit()
}

// testSameBatchReferences: a batch may reference ids it minted earlier
// (reference §3.1): an entry in a conversation it creates, a task and its
// patch, a fork at its own entry, a remove of its own element.
func testSameBatchReferences(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	e := x.entry(c, "user")
	task := x.task(c, "generation")
	x.patch(task, "streaming", storage.RoleInflight)
	list := storage.ConversationList[string]("test.list", storage.Sticky).In(c).Address
	el := x.push(list, "A")
	x.remove(list, el)
	fork := x.fork(c, e)
	forkEntry := x.entry(fork, "user")
	owned := x.ownedConversation(task)
	// A task may claim a conversation the batch creates after it.
	job := x.taskWith(storage.Task{ConversationID: c, Kind: "job", Status: "pending", Role: storage.RoleStart,
		Owns: []ID{x.next() + 1}})
	sub := x.ownedConversation(job)
	x.commit()

	if got, want := s.transcript(fork), []ID{e, forkEntry}; !cmp.Equal(got, want) {
		t.Errorf("transcript(fork) = %v; want %v", got, want)
	}
	if got := s.getTasks(task)[task]; got == nil || got.Role != storage.RoleInflight || got.Status != "streaming" {
		t.Errorf("task after its same-batch patch = %+v; want status streaming, role inflight", got)
	}
	if got := s.list(list, 0); len(got) != 0 {
		t.Errorf("list after a same-batch append and remove = %v; want []", got)
	}
	if got := s.getConversations(owned)[owned]; got.Owner != task {
		t.Errorf("owned conversation = %+v; want owner %d", got, task)
	}
	if got := s.getTasks(job)[job]; got == nil || !cmp.Equal(got.Owns, []ID{sub}) {
		t.Errorf("task %d = %+v; want it to own %d, created after it", job, got, sub)
	}
}

func testRejectedBatchConsumesNoIDs(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.commit()

	bad := s.tx()
	bad.entry(c, "user")
	bad.entryWith(storage.Entry{ConversationID: c}) // no kind
	if be := bad.reject(); be.Index != 1 {
		t.Errorf("rejected write index = %d; want 1", be.Index)
	}
	if got := s.LastSeq(); got != 1 {
		t.Errorf("LastSeq() after a rejected batch = %d; want 1", got)
	}
	good := s.tx()
	if e := good.entry(c, "user"); e != 2 {
		t.Fatalf("next entry numbered %d; want 2", e)
	}
	good.commit()
	if got := s.transcript(c); !cmp.Equal(got, []ID{2}) {
		t.Errorf("transcript = %v; want [2]: the rejected entry must not exist", got)
	}
}

func testPagesReadAt(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.entry(c, "user")
	x.task(c, "job")
	list := storage.ConversationList[string]("test.list", storage.Rewind).In(c).Address
	x.push(list, "A")
	value := storage.ConversationValue[string]("test.value", storage.Rewind).In(c).WithKey("k").Address
	x.set(value, "v")
	x.filler()
	x.commit()
	want := s.LastSeq()

	got := map[string]ID{
		"ScanConversations": s.scanConversations(storage.ConversationQuery{Cursor: all}).ReadAt,
		"ScanEntries":       s.scanEntries(storage.EntryQuery{Cursor: all, ConversationID: c}).ReadAt,
		"ScanTasks":         s.scanTasks(storage.TaskQuery{Cursor: all}).ReadAt,
		"ReadList":          s.readList(list, storage.ListQuery{Cursor: all}).ReadAt,
		"ScanValues":        s.scanValues(storage.ValueQuery{Scope: value.Scope, Namespace: value.Namespace, Limit: 10}).ReadAt,
	}
	for name, readAt := range got {
		if readAt != want {
			t.Errorf("%s page ReadAt = %d; want LastSeq %d", name, readAt, want)
		}
	}
}

// testEmptyPagesEncodeArrays: a page's items are an array in the reference's
// JSON shape (Page<T>.items: readonly T[]), never null.
func testEmptyPagesEncodeArrays(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.commit()

	pages := map[string]any{
		"ScanConversations": s.scanConversations(storage.ConversationQuery{Cursor: all, Parent: c}),
		"ScanEntries":       s.scanEntries(storage.EntryQuery{Cursor: all, ConversationID: c}),
		"ScanTasks":         s.scanTasks(storage.TaskQuery{Cursor: all}),
		"ReadList":          s.readList(storage.ConversationList[string]("test.list", storage.Rewind).In(c).Address, storage.ListQuery{Cursor: all}),
		"ScanValues":        s.scanValues(storage.ValueQuery{Scope: storage.ConversationScope(c), Namespace: "test.value", Limit: 10}),
	}
	for name, p := range pages {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("%s: encoding the page: %v", name, err)
		}
		var decoded struct{ Items json.RawMessage }
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatalf("%s: decoding %s: %v", name, b, err)
		}
		if string(decoded.Items) != "[]" {
			t.Errorf("%s: empty page encodes items as %s; want []", name, decoded.Items)
		}
	}
}

func testClosed(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.entry(c, "user")
	x.commit()
	if err := s.Close(s.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := s.ctx
	value := storage.ConversationValue[string]("test.value", storage.Rewind).In(c).Address
	calls := map[string]func() error{
		"Commit": func() error {
			_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
				{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: c, Kind: "user"}},
			}})
			return err
		},
		"GetConversations": func() error { _, err := s.GetConversations(ctx, []ID{c}); return err },
		"ScanConversations": func() error {
			_, err := s.ScanConversations(ctx, storage.ConversationQuery{Cursor: all})
			return err
		},
		"GetEntries": func() error { _, err := s.GetEntries(ctx, []ID{2}); return err },
		"ScanEntries": func() error {
			_, err := s.ScanEntries(ctx, storage.EntryQuery{Cursor: all, ConversationID: c})
			return err
		},
		"NewestHead": func() error { _, _, err := s.NewestHead(ctx, c, 0); return err },
		"EntryKinds": func() error { _, err := s.EntryKinds(ctx); return err },
		"GetTasks":   func() error { _, err := s.GetTasks(ctx, []ID{1}); return err },
		"ScanTasks":  func() error { _, err := s.ScanTasks(ctx, storage.TaskQuery{Cursor: all}); return err },
		"GetValue":   func() error { _, _, err := s.GetValue(ctx, value, 0); return err },
		"ScanValues": func() error {
			_, err := s.ScanValues(ctx, storage.ValueQuery{Scope: value.Scope, Namespace: value.Namespace, Limit: 1})
			return err
		},
		"ReadList": func() error { _, err := s.ReadList(ctx, value, storage.ListQuery{Cursor: all}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close: error = %v; want storage.ErrClosed", name, err)
		}
	}
}
