package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/storagetest"
)

type ID = storage.ID

func TestStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage { return memory.New() })
}

// noiseWritesMin is how many unrelated entries, value versions and list
// elements the cheapest world holds; the largest holds ten times as many.
const noiseWritesMin = 2_000

// TestReadWorkGrowsWithForkDepthNotHistory holds the memory backend to
// reference §2.2 and §4.4: a read of the deepest fork of a chain costs its
// fork depth, never unrelated history. Work() is a deterministic count of
// index probes and records visited, so the bounds are exact arithmetic, not
// timing.
func TestReadWorkGrowsWithForkDepthNotHistory(t *testing.T) {
	w10 := readWork(t, 10, noiseWritesMin)
	w20 := readWork(t, 20, noiseWritesMin)
	w40 := readWork(t, 40, noiseWritesMin)
	w40Noisy := readWork(t, 40, 10*noiseWritesMin)
	for _, read := range []string{"GetValue", "ReadList", "NewestHead", "ScanEntries"} {
		t.Run(read, func(t *testing.T) {
			a, b, c, noisy := w10[read], w20[read], w40[read], w40Noisy[read]
			t.Logf("work at depth 10, 20, 40: %d, %d, %d; depth 40 with 10x history: %d", a, b, c, noisy)
			if !(a < b && b < c) {
				t.Errorf("work at depth 10, 20, 40 = %d, %d, %d; want it to grow with depth", a, b, c)
			}
			if c > 5*a {
				t.Errorf("work at depth 40 = %d; want at most 5 × the work at depth 10 (%d): linear in depth", c, 5*a)
			}
			if diff := noisy - c; diff*10 > c || -diff*10 > c {
				t.Errorf("work at depth 40 with 10x unrelated history = %d; want within 10%% of %d", noisy, c)
			}
		})
	}
}

// readWork builds a root conversation with a head, a rewindable value and a
// rewindable list, a chain of depth forks each with local entries and a
// local value, then noise: writes to the root after every fork point and to
// an unrelated conversation. It returns the work of each read of the
// deepest fork.
func readWork(t *testing.T, depth, noise int) map[string]int64 {
	t.Helper()
	ctx := t.Context()
	s := memory.New()
	b := &batch{s: s, t: t}
	root := b.conversation(nil)
	value := storage.ConversationValue[string]("test.value", storage.Rewind)
	list := storage.ConversationList[string]("test.list", storage.Rewind)
	b.entry(root, true)
	b.write(storage.Write{Type: storage.WriteValueSet, Addr: ptr(value.In(root).Address), Value: js("root")})
	for i := range 3 {
		b.write(storage.Write{Type: storage.WriteListAppend, Addr: ptr(list.In(root).Address), Value: js(i)})
	}
	last := b.entry(root, false)
	b.commit()

	conv := root
	for range depth {
		conv = b.conversation(&storage.ParentRef{ConversationID: conv, At: last})
		b.entry(conv, false)
		b.write(storage.Write{Type: storage.WriteValueSet, Addr: ptr(value.In(conv).WithKey("local").Address), Value: js("local")})
		last = b.entry(conv, false)
		b.commit()
	}

	unrelated := b.conversation(nil)
	for i := range noise {
		for _, c := range []ID{root, unrelated} {
			b.entry(c, i%100 == 0)
			b.write(storage.Write{Type: storage.WriteValueSet, Addr: ptr(value.In(c).Address), Value: js(i)})
			b.write(storage.Write{Type: storage.WriteListAppend, Addr: ptr(list.In(c).Address), Value: js(i)})
		}
		if len(b.writes) >= 1_000 {
			b.commit()
		}
	}
	b.commit()

	reads := map[string]func() error{
		"GetValue": func() error {
			v, ok, err := s.GetValue(ctx, value.In(conv).Address, 0)
			if err == nil && (!ok || string(v.Value) != `"root"`) {
				err = fmt.Errorf("value = %s, %v; want \"root\"", v.Value, ok)
			}
			return err
		},
		"ReadList": func() error {
			p, err := s.ReadList(ctx, list.In(conv).Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}})
			if err == nil && len(p.Items) != 3 {
				err = fmt.Errorf("list has %d elements; want 3", len(p.Items))
			}
			return err
		},
		"NewestHead": func() error {
			e, ok, err := s.NewestHead(ctx, conv, 0)
			if err == nil && (!ok || e.ConversationID != root || e.ID != 2) {
				err = fmt.Errorf("newest head = %+v, %v; want the root's first entry", e, ok)
			}
			return err
		},
		"ScanEntries": func() error {
			p, err := s.ScanEntries(ctx, storage.EntryQuery{ConversationID: conv, Cursor: storage.Cursor{Limit: 10}})
			if err == nil && len(p.Items) != 10 {
				err = fmt.Errorf("page has %d entries; want 10", len(p.Items))
			}
			return err
		},
	}
	out := map[string]int64{}
	for name, read := range reads {
		before := s.Work()
		if err := read(); err != nil {
			t.Fatalf("depth %d, noise %d: %s: %v", depth, noise, name, err)
		}
		out[name] = s.Work() - before
	}
	return out
}

// batch numbers writes from the store's LastSeq, as the harness's Tx does.
type batch struct {
	s      *memory.Store
	t      *testing.T
	writes []storage.Write
}

func (b *batch) next() ID { return b.s.LastSeq() + 1 + ID(len(b.writes)) }

func (b *batch) write(w storage.Write) ID {
	id := b.next()
	b.writes = append(b.writes, w)
	return id
}

func (b *batch) conversation(parent *storage.ParentRef) ID {
	return b.write(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: b.next(), Parent: parent}})
}

// entry appends an entry, a reset head when head is set.
func (b *batch) entry(conv ID, head bool) ID {
	e := &storage.Entry{ID: b.next(), ConversationID: conv, Kind: "user"}
	if head {
		e.Kind, e.Head = "reset", e.ID
	}
	return b.write(storage.Write{Type: storage.WriteEntry, Entry: e})
}

func (b *batch) commit() {
	b.t.Helper()
	if _, err := b.s.Commit(context.Background(), storage.CommitBatch{Kind: storage.BatchMain, Writes: b.writes}); err != nil {
		b.t.Fatalf("Commit: %v", err)
	}
	b.writes = nil
}

func ptr(a storage.Address) *storage.Address { return &a }

func js(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// Reads may run at the same time (storage.Storage allows it, and the
// harness reads outside its line while the line reads too); the work count
// they share must not race. Run with -race.
func TestConcurrentReadsShareTheWorkCountSafely(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	conv := storage.Conversation{ID: 1}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &conv}}}); err != nil {
		t.Fatal(err)
	}
	const readers, reads = 4, 200
	done := make(chan error, readers)
	for range readers {
		go func() {
			for range reads {
				if _, err := s.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: 1}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range readers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if s.Work() < readers*reads {
		t.Fatalf("work = %d after %d reads; want every read counted", s.Work(), readers*reads)
	}
}

// ApplyDecoded trusts what a JSON decoder parsed, the batch's raw values,
// and nothing else: every other rule rejects as Apply's does.
func TestApplyDecodedSkipsOnlyTheScanOfRawValues(t *testing.T) {
	ctx := context.Background()
	conv := func() storage.CommitBatch {
		return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}}
	}
	value := func(raw string) storage.CommitBatch {
		a := storage.Address{Scope: storage.ConversationScope(1), Namespace: "n"}
		return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(raw)}}}
	}
	fresh := func() *memory.Store {
		s := memory.New()
		if err := s.Apply(ctx, conv(), 1); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := fresh().Apply(ctx, value(`{nope`), 2); err == nil {
		t.Fatal("Apply took a value that is not JSON")
	}
	if err := fresh().ApplyDecoded(ctx, value(`{nope`), 2); err != nil {
		t.Fatalf("ApplyDecoded scanned the raw value again: %v", err)
	}
	entry := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 9, Kind: "user"}}}}
	patch := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WritePatch, ID: 7, Status: "s", Role: storage.RoleInflight}}}
	for name, b := range map[string]storage.CommitBatch{"a missing value": value(``), "an unknown conversation": entry, "an unknown task": patch} {
		want := fresh().Apply(ctx, b, 2)
		got := fresh().ApplyDecoded(ctx, b, 2)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%s: ApplyDecoded = %v; want Apply's rejection %v", name, got, want)
		}
	}
}

// TaskState gives the state a task holds now, without counting a read:
// the JSONL backend asks it for every patch it writes.
func TestTaskStateIsTheStoredStateUncounted(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	for _, b := range []storage.CommitBatch{
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
			{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart, State: json.RawMessage(`{"a":1}`)}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WritePatch, ID: 2, State: json.RawMessage(`{"a":2}`)}}},
	} {
		if _, err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Work()
	if got, ok := s.TaskState(2); !ok || string(got) != `{"a":2}` {
		t.Fatalf("TaskState(2) = %s, %v; want the patched state", got, ok)
	}
	if got, ok := s.TaskState(3); ok || got != nil {
		t.Fatalf("TaskState(3) = %s, %v; want no task", got, ok)
	}
	if s.Work() != before {
		t.Fatalf("TaskState counted %d reads", s.Work()-before)
	}
}
