package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

type ID = storage.ID

// jobKind is a task kind for tests: planned → running → planned cycles,
// exited/killed terminal.
var jobKind = core.KindFuncs{Statuses: core.Statuses{Name: "test_job", Initial: "planned", Roles: map[string]storage.TaskRole{
	"planned": storage.RoleStart, "running": storage.RoleInflight,
	"exited": storage.RoleTerminal, "killed": storage.RoleTerminal,
}}}

var noteKind = storage.DefineEntryKind[map[string]string]("plan_note")

type fixture struct {
	t       *testing.T
	ctx     context.Context
	store   *memory.Store
	line    *core.Line
	kinds   *core.Kinds
	commits []storage.CommitBatch // what AfterCommit saw, in order
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), store: memory.New(), kinds: core.NewKinds()}
	if err := f.kinds.AddTask(jobKind); err != nil {
		t.Fatal(err)
	}
	f.kinds.AddEntry(noteKind)
	f.line = core.NewLine(core.RealRuntime(), f.store, f.kinds, core.LineOptions{
		AfterCommit: func(_ context.Context, b storage.CommitBatch, _ storage.Range) func() {
			f.commits = append(f.commits, b)
			return nil
		},
	})
	return f
}

// commit runs a plan that must succeed.
func (f *fixture) commit(plan func(tx *core.Tx)) storage.Range {
	f.t.Helper()
	r, err := f.line.Commit(f.ctx, func(tx *core.Tx) error { plan(tx); return nil })
	if err != nil {
		f.t.Fatalf("commit: %v", err)
	}
	return r
}

// reject runs a plan that must be rejected with rule, and checks that
// storage did not change.
func (f *fixture) reject(rule core.Rule, plan func(tx *core.Tx)) *core.CommitError {
	f.t.Helper()
	before, last := f.snapshot(), f.store.LastSeq()
	_, err := f.line.Commit(f.ctx, func(tx *core.Tx) error { plan(tx); return nil })
	var ce *core.CommitError
	if !errors.As(err, &ce) {
		f.t.Fatalf("commit error = %v; want a *core.CommitError with rule %s", err, rule)
	}
	if ce.Rule != rule {
		f.t.Fatalf("rule = %s (%v); want %s", ce.Rule, err, rule)
	}
	if got := f.store.LastSeq(); got != last {
		f.t.Fatalf("lastSeq after rejection = %d; want %d", got, last)
	}
	if diff := cmp.Diff(before, f.snapshot()); diff != "" {
		f.t.Fatalf("storage changed by a rejected commit (-before +after):\n%s", diff)
	}
	return ce
}

// snapshot reads everything a test session can hold, for before/after checks.
type snapshot struct {
	LastSeq ID
	Convs   []storage.Conversation
	Entries map[ID][]*storage.Entry
	Tasks   []*storage.Task
}

func (f *fixture) snapshot() snapshot {
	f.t.Helper()
	s := snapshot{LastSeq: f.store.LastSeq(), Entries: map[ID][]*storage.Entry{}}
	cp, err := f.store.ScanConversations(f.ctx, storage.ConversationQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}})
	if err != nil {
		f.t.Fatal(err)
	}
	s.Convs = cp.Items
	for _, c := range cp.Items {
		ep, err := f.store.ScanEntries(f.ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: c.ID})
		if err != nil {
			f.t.Fatal(err)
		}
		s.Entries[c.ID] = ep.Items
	}
	tp, err := f.store.ScanTasks(f.ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}})
	if err != nil {
		f.t.Fatal(err)
	}
	s.Tasks = tp.Items
	return s
}

func (f *fixture) conversation() ID {
	f.t.Helper()
	var id ID
	f.commit(func(tx *core.Tx) { id = tx.CreateConversation(core.ConversationSpec{}) })
	return id
}

func (f *fixture) user(conv ID, text string) ID {
	f.t.Helper()
	var id ID
	f.commit(func(tx *core.Tx) { id = core.AppendUser(tx, conv, ai.UserText(text, 0)) })
	return id
}

func (f *fixture) assistant(conv ID, text string) ID {
	f.t.Helper()
	var id ID
	f.commit(func(tx *core.Tx) {
		id = core.AppendAssistant(tx, conv, ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text(text)), StopReason: ai.StopStop})
	})
	return id
}

// fill commits n session-value writes so the next id is predictable.
func (f *fixture) fill(n int) {
	f.t.Helper()
	for range n {
		f.commit(func(tx *core.Tx) { tx.SetValue(storage.SessionValue[int]("filler").Address, 0) })
	}
}

// advanceTo commits filler writes until the next id is next.
func (f *fixture) advanceTo(next ID) {
	f.t.Helper()
	if f.store.LastSeq() >= next {
		f.t.Fatalf("already at %d, cannot advance to %d", f.store.LastSeq(), next)
	}
	f.fill(int(next - 1 - f.store.LastSeq()))
}

func (f *fixture) context(conv, through ID) *core.Context {
	f.t.Helper()
	c, err := core.DeriveContext(f.ctx, f.store, conv, through)
	if err != nil {
		f.t.Fatalf("derive context of %d through %d: %v", conv, through, err)
	}
	return c
}

func (f *fixture) task(id ID) *storage.Task {
	f.t.Helper()
	got, err := f.store.GetTasks(f.ctx, []ID{id})
	if err != nil || got[id] == nil {
		f.t.Fatalf("task %d: %v (found %v)", id, err, got[id] != nil)
	}
	return got[id]
}

func ids(xs ...ID) []ID { return xs }
