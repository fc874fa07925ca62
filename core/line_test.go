package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

var (
	planMode = storage.ConversationValue[bool]("plugin.plan", storage.Rewind)
	expanded = storage.ConversationValue[bool]("ui.expanded", storage.Sticky)
	moves    = storage.ConversationList[string]("game.moves", storage.Rewind)
	inbox    = storage.ConversationList[string]("pi.inbox", storage.Sticky)
	request  = storage.SessionValue[map[string]ID]("pi.request")
)

func TestIDsAreLastSeqPlusOnePlusIndex(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation() // 1
	f.advanceTo(100)
	var got []ID
	r := f.commit(func(tx *core.Tx) {
		core.TxValue(tx, planMode.In(conv)).Set(true)
		got = append(got, tx.Entry(core.UserKind, conv, core.EntryDraft{Model: []ai.Message{ai.UserText("Inspect", 0)}}))
		got = append(got, tx.Task(jobKind, core.TaskSpec{ConversationID: conv, State: map[string]ID{"input": got[0]}}))
	})
	if want := ids(101, 102); !slices.Equal(got, want) {
		t.Fatalf("ids = %v; want %v", got, want)
	}
	if want := (storage.Range{First: 100, Last: 102}); r != want {
		t.Fatalf("range = %+v; want %+v", r, want)
	}
	if task := f.task(102); string(task.State) != `{"input":101}` {
		t.Fatalf("task state = %s; want the entry id minted in the same commit", task.State)
	}
}

func TestRejectedCommitConsumesNoIDs(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.advanceTo(100)
	planErr := errors.New("plan gave up")
	_, err := f.line.Commit(f.ctx, func(tx *core.Tx) error {
		core.AppendUser(tx, conv, ai.UserText("lost", 0))
		return planErr
	})
	if !errors.Is(err, planErr) {
		t.Fatalf("err = %v; want the plan's error", err)
	}
	f.reject(core.RuleUnknownStatus, func(tx *core.Tx) {
		id := tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
		tx.Patch(id, core.TaskPatch{Status: "sleeping"})
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a panicking plan did not propagate its panic")
			}
		}()
		f.line.Commit(f.ctx, func(tx *core.Tx) error {
			core.AppendUser(tx, conv, ai.UserText("lost too", 0))
			panic("plan bug")
		})
	}()
	if id := f.user(conv, "kept"); id != 100 {
		t.Fatalf("next id after three discarded plans = %d; want 100", id)
	}
}

func TestEmptyPlanWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.conversation()
	n := len(f.commits)
	r := f.commit(func(tx *core.Tx) {})
	if r.First != 2 || r.Last != 1 {
		t.Fatalf("range of an empty commit = %+v; want {2 1}", r)
	}
	if len(f.commits) != n || f.store.LastSeq() != 1 {
		t.Fatalf("an empty commit was persisted or published")
	}
}

func TestConcurrentCommitsSerialize(t *testing.T) {
	// Whatever the interleaving, every batch must get a contiguous range and
	// no two batches may overlap: the line admits one plan at a time.
	f := newFixture(t)
	conv := f.conversation()
	const workers, perWorker = 8, 25
	var (
		mu     sync.Mutex
		ranges []storage.Range
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				var minted []ID
				r, err := f.line.Commit(f.ctx, func(tx *core.Tx) error {
					for range 1 + (w+i)%3 {
						minted = append(minted, core.TxList(tx, inbox.In(conv)).Append("x"))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if minted[0] != r.First || minted[len(minted)-1] != r.Last {
					t.Errorf("ids %v do not match range %+v", minted, r)
				}
				mu.Lock()
				ranges = append(ranges, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(ranges, func(a, b storage.Range) int { return int(a.First - b.First) })
	next := ID(2)
	for _, r := range ranges {
		if r.First != next {
			t.Fatalf("batch %+v; want it to start at %d (ranges overlap or leave gaps)", r, next)
		}
		next = r.Last + 1
	}
	if f.store.LastSeq() != next-1 {
		t.Fatalf("lastSeq = %d; want %d", f.store.LastSeq(), next-1)
	}
}

func TestBuilderVerbsProduceTheirWrites(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation() // 1
	var task, elem ID
	f.commit(func(tx *core.Tx) {
		task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv, State: map[string]any{"cmd": "ls", "n": 1}}) // 2
		elem = core.TxList(tx, moves.In(conv)).Append("e4")                                                      // 3
	})
	f.commits = nil
	var child ID
	f.commit(func(tx *core.Tx) {
		core.TxValue(tx, planMode.In(conv)).Set(true)                                // 4
		core.TxValue(tx, planMode.In(conv)).Delete()                                 // 5
		core.TxList(tx, moves.In(conv)).Append("e2")                                 // 6
		core.TxList(tx, moves.In(conv)).Remove(elem)                                 // 7
		core.TxList(tx, moves.In(conv)).Clear()                                      // 8
		tx.Entry(noteKind, conv, core.EntryDraft{Data: map[string]string{"k": "v"}}) // 9
		tx.Patch(task, core.TaskPatch{Status: "running", State: map[string]any{"n": 2}, Abort: true})
		child = tx.CreateConversation(core.ConversationSpec{Owner: task}) // 11, plus the owner's patch 12
		tx.Settle(task, "exited", map[string]any{"exitCode": 0})          // 13
		tx.DeleteConversation(child)                                      // 14
	})
	addr := func(a storage.Address) *storage.Address { return &a }
	want := []storage.Write{
		{Type: storage.WriteValueSet, Addr: addr(planMode.In(conv).Address), Value: json.RawMessage(`true`)},
		{Type: storage.WriteValueDelete, Addr: addr(planMode.In(conv).Address)},
		{Type: storage.WriteListAppend, Addr: addr(moves.In(conv).Address), Value: json.RawMessage(`"e2"`)},
		{Type: storage.WriteListRemove, Addr: addr(moves.In(conv).Address), Element: elem},
		{Type: storage.WriteListClear, Addr: addr(moves.In(conv).Address)},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 9, ConversationID: conv, Kind: "plan_note", Data: json.RawMessage(`{"k":"v"}`)}},
		{Type: storage.WritePatch, ID: task, Status: "running", Role: storage.RoleInflight, State: json.RawMessage(`{"cmd":"ls","n":2}`), Abort: true},
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 11, Owner: task}},
		{Type: storage.WritePatch, ID: task, Owns: ids(11)},
		{Type: storage.WriteSettle, ID: task, Status: "exited", Role: storage.RoleTerminal, State: json.RawMessage(`{"cmd":"ls","exitCode":0,"n":2}`)},
		{Type: storage.WriteDeleteConversation, ID: child},
	}
	if len(f.commits) != 1 {
		t.Fatalf("%d commits published; want 1", len(f.commits))
	}
	if diff := cmp.Diff(want, f.commits[0].Writes); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	if got := f.task(task); got.Role != storage.RoleTerminal || !slices.Equal(got.Owns, ids(11)) || !got.Abort {
		t.Fatalf("settled task = %+v; want terminal, abort-marked, owning 11", got)
	}
}

func TestTaskCreatedWithAConversationOwnsItInTheSameWrite(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	var task, child ID
	f.commits = nil
	f.commit(func(tx *core.Tx) {
		task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
		child = tx.CreateConversation(core.ConversationSpec{Owner: task})
	})
	if n := len(f.commits[0].Writes); n != 2 {
		t.Fatalf("%d writes; want 2 (the task write carries owns, no extra patch)", n)
	}
	if got := f.task(task).Owns; !slices.Equal(got, ids(child)) {
		t.Fatalf("owns = %v; want [%d]", got, child)
	}
}

func TestRewindableStateAfterAnEntryRejects(t *testing.T) {
	cases := map[string]func(tx *core.Tx, conv, elem ID){
		"value set":    func(tx *core.Tx, conv, _ ID) { core.TxValue(tx, planMode.In(conv)).Set(true) },
		"value delete": func(tx *core.Tx, conv, _ ID) { core.TxValue(tx, planMode.In(conv)).Delete() },
		"list append":  func(tx *core.Tx, conv, _ ID) { core.TxList(tx, moves.In(conv)).Append("m") },
		"list remove":  func(tx *core.Tx, conv, elem ID) { core.TxList(tx, moves.In(conv)).Remove(elem) },
		"list clear":   func(tx *core.Tx, conv, _ ID) { core.TxList(tx, moves.In(conv)).Clear() },
	}
	for name, write := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			conv := f.conversation()
			var elem ID
			f.commit(func(tx *core.Tx) { elem = core.TxList(tx, moves.In(conv)).Append("m0") })
			f.reject(core.RuleStateAfterEntry, func(tx *core.Tx) {
				core.AppendUser(tx, conv, ai.UserText("hi", 0))
				write(tx, conv, elem)
			})
			// The same write before the entry is fine.
			f.commit(func(tx *core.Tx) {
				write(tx, conv, elem)
				core.AppendUser(tx, conv, ai.UserText("hi", 0))
			})
		})
	}
}

func TestSessionAndStickyStateMayFollowAndReferenceAnEntry(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	var entry ID
	f.commit(func(tx *core.Tx) {
		entry = core.AppendUser(tx, conv, ai.UserText("hi", 0))
		core.TxValue(tx, request).Set(map[string]ID{"inputId": entry})
		core.TxValue(tx, expanded.In(conv)).Set(true)
		core.TxList(tx, inbox.In(conv)).Append("after")
	})
	v, ok, err := f.store.GetValue(f.ctx, request.Address, 0)
	if err != nil || !ok || string(v.Value) != `{"inputId":2}` {
		t.Fatalf("session value = %s, %v, %v; want the entry id 2", v.Value, ok, err)
	}
}

func TestReadsInsideAPlanSeeCommittedStateOnly(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.commit(func(tx *core.Tx) { core.TxValue(tx, expanded.In(conv)).Set(false) })
	f.commit(func(tx *core.Tx) {
		v := core.TxValue(tx, expanded.In(conv))
		v.Set(true)
		got, ok, err := v.Get(0)
		if err != nil || !ok || got {
			t.Errorf("read after own write = %v, %v, %v; want the committed false", got, ok, err)
		}
		id := core.AppendUser(tx, conv, ai.UserText("hi", 0))
		if _, found, _ := tx.GetEntry(id); found {
			t.Errorf("own uncommitted entry %d is visible to reads", id)
		}
	})
}

// failingStore rejects every commit with an I/O-like error.
type failingStore struct {
	storage.Storage
	err error
}

func (s failingStore) Commit(context.Context, storage.CommitBatch) (storage.Range, error) {
	return storage.Range{}, s.err
}

func TestPublicationOnlyAfterPersistence(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	ioErr := errors.New("disk on fire")
	published := 0
	line := core.NewLine(core.RealRuntime(), failingStore{f.store, ioErr}, f.kinds, core.LineOptions{
		AfterCommit: func(context.Context, storage.CommitBatch, storage.Range) func() { published++; return nil },
	})
	_, err := line.Commit(f.ctx, func(tx *core.Tx) error { core.AppendUser(tx, conv, ai.UserText("x", 0)); return nil })
	if !errors.Is(err, ioErr) {
		t.Fatalf("err = %v; want the storage error", err)
	}
	if published != 0 {
		t.Fatalf("AfterCommit ran %d times for a batch that was not persisted", published)
	}
}

func TestCancelledCallerNeverAbandonsAdmittedPersistence(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	ctx, cancel := context.WithCancel(f.ctx)
	r, err := f.line.Commit(ctx, func(tx *core.Tx) error {
		core.AppendUser(tx, conv, ai.UserText("x", 0))
		cancel() // the caller gives up after admission
		return nil
	})
	if err != nil || r.Last != 2 || f.store.LastSeq() != 2 {
		t.Fatalf("commit = %+v, %v (lastSeq %d); want it persisted despite cancellation", r, err, f.store.LastSeq())
	}
	// Admission is not a blanket signal check: a cancelled caller still commits.
	if r, err := f.line.Commit(ctx, func(tx *core.Tx) error { core.AppendUser(tx, conv, ai.UserText("y", 0)); return nil }); err != nil || r.Last != 3 {
		t.Fatalf("commit with a cancelled ctx = %+v, %v; want it admitted and persisted", r, err)
	}
}

func TestTaskRulesReject(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	var live, done ID
	f.commit(func(tx *core.Tx) {
		live = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
		done = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
	})
	f.commit(func(tx *core.Tx) { tx.Settle(done, "killed", nil) })
	unknownKind := core.KindFuncs{Statuses: core.Statuses{Name: "ghost", Initial: "a", Roles: map[string]storage.TaskRole{"a": storage.RoleStart}}}

	cases := []struct {
		name string
		rule core.Rule
		id   ID
		plan func(tx *core.Tx)
	}{
		{"unknown kind", core.RuleUnknownTaskKind, 0, func(tx *core.Tx) { tx.Task(unknownKind, core.TaskSpec{ConversationID: conv}) }},
		{"unknown status in patch", core.RuleUnknownStatus, live, func(tx *core.Tx) { tx.Patch(live, core.TaskPatch{Status: "sleeping"}) }},
		{"terminal status in patch", core.RulePatchTerminal, live, func(tx *core.Tx) { tx.Patch(live, core.TaskPatch{Status: "exited"}) }},
		{"settle with a non-terminal status", core.RuleSettleNotTerminal, live, func(tx *core.Tx) { tx.Settle(live, "running", nil) }},
		{"settle with an unknown status", core.RuleUnknownStatus, live, func(tx *core.Tx) { tx.Settle(live, "vanished", nil) }},
		{"patch of a terminal task", core.RuleTaskTerminal, done, func(tx *core.Tx) { tx.Patch(done, core.TaskPatch{Abort: true}) }},
		{"settle of a terminal task", core.RuleTaskTerminal, done, func(tx *core.Tx) { tx.Settle(done, "exited", nil) }},
		{"patch of an unknown task", core.RuleUnknownTask, 999, func(tx *core.Tx) { tx.Patch(999, core.TaskPatch{Abort: true}) }},
		{"empty patch", core.RuleBadPayload, live, func(tx *core.Tx) { tx.Patch(live, core.TaskPatch{}) }},
		{"dependency on a later task", core.RuleDependency, 99, func(tx *core.Tx) {
			tx.Task(jobKind, core.TaskSpec{ConversationID: conv, After: ids(99)})
		}},
		{"dependency on an id that is no task", core.RuleDependency, 4, func(tx *core.Tx) {
			tx.Task(jobKind, core.TaskSpec{ConversationID: conv, After: ids(4)}) // 4 is the settle write
		}},
		{"settle twice in one commit", core.RuleTaskTerminal, live, func(tx *core.Tx) {
			tx.Settle(live, "exited", nil)
			tx.Settle(live, "killed", nil)
		}},
		{"scratch write in a main commit", core.RuleScratchInMain, live, func(tx *core.Tx) {
			tx.SetValue(storage.ScratchValue[int]("frames").In(live).Address, 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			ce := f.reject(c.rule, c.plan)
			if c.id != 0 && ce.ID != c.id {
				t.Fatalf("error names %d (%v); want %d", ce.ID, ce, c.id)
			}
		})
	}
}

func TestDependenciesStayInOneOwnershipTree(t *testing.T) {
	f := newFixture(t)
	a := f.conversation()
	b := f.conversation()
	var owner, inA, child ID
	f.commit(func(tx *core.Tx) {
		owner = tx.Task(jobKind, core.TaskSpec{ConversationID: a})
		inA = tx.Task(jobKind, core.TaskSpec{ConversationID: a})
		child = tx.CreateConversation(core.ConversationSpec{Owner: owner})
	})
	// A task in a's owned child may wait for a task in a.
	f.commit(func(tx *core.Tx) { tx.Task(jobKind, core.TaskSpec{ConversationID: child, After: ids(inA)}) })
	// A task in the independent conversation b may not.
	ce := f.reject(core.RuleDependencyTree, func(tx *core.Tx) {
		tx.Task(jobKind, core.TaskSpec{ConversationID: b, After: ids(inA)})
	})
	if ce.ID != inA {
		t.Fatalf("error names %d; want the dependency %d", ce.ID, inA)
	}
	// Nor may a fork of a: fork provenance is not ownership.
	e := f.user(a, "hi")
	var fork ID
	f.commit(func(tx *core.Tx) { fork = tx.Fork(a, e) })
	f.reject(core.RuleDependencyTree, func(tx *core.Tx) {
		tx.Task(jobKind, core.TaskSpec{ConversationID: fork, After: ids(inA)})
	})
}

func TestScratchCommitsCarryOneTasksScratchOnly(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	var task ID
	f.commit(func(tx *core.Tx) { task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv}) })
	frames := storage.ScratchList[string]("frames")
	f.commits = nil
	if _, err := f.line.Scratch(f.ctx, task, func(sc core.ScratchTx) error {
		sc.Append(frames.Address, "f1") // unbound: bound to the task
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if b := f.commits[0]; b.Kind != storage.BatchScratch || b.Task != task || b.Writes[0].Addr.Scope != storage.ScratchScope(task) {
		t.Fatalf("scratch batch = %+v; want a scratch batch of task %d", b, task)
	}
	for name, plan := range map[string]func(sc core.ScratchTx){
		"conversation state": func(sc core.ScratchTx) { sc.SetValue(expanded.In(conv).Address, true) },
		"another task":       func(sc core.ScratchTx) { sc.SetValue(storage.ScratchValue[int]("x").In(task+100).Address, 1) },
	} {
		last := f.store.LastSeq()
		_, err := f.line.Scratch(f.ctx, task, func(sc core.ScratchTx) error { plan(sc); return nil })
		if core.RuleOf(err) != core.RuleMainInScratch || f.store.LastSeq() != last {
			t.Errorf("%s in a scratch commit: err %v, lastSeq %d→%d; want %s and nothing written", name, err, last, f.store.LastSeq(), core.RuleMainInScratch)
		}
	}
	f.commit(func(tx *core.Tx) { tx.Settle(task, "exited", nil) })
	_, err := f.line.Scratch(f.ctx, task, func(sc core.ScratchTx) error { sc.Append(frames.Address, "late"); return nil })
	var be *storage.BatchError
	if core.RuleOf(err) != core.RuleStorage || !errors.As(err, &be) {
		t.Fatalf("scratch write after settle = %v; want a storage rejection", err)
	}
	p, err := f.store.ReadList(f.ctx, frames.In(task).Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}})
	if err != nil || len(p.Items) != 0 {
		t.Fatalf("scratch after settle = %v, %v; want retired (empty)", p.Items, err)
	}
}

func TestUnknownEntryKindRejectsAndUnregisteredKindsAreReported(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.reject(core.RuleUnknownEntryKind, func(tx *core.Tx) {
		tx.Entry(storage.DefineEntryKind[any]("mystery"), conv, core.EntryDraft{})
	})
	f.commit(func(tx *core.Tx) { tx.Entry(noteKind, conv, core.EntryDraft{Data: map[string]string{"a": "b"}}) })
	stored, err := f.store.EntryKinds(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := core.NewKinds().UnregisteredEntryKinds(stored); !slices.Equal(got, []string{"plan_note"}) {
		t.Fatalf("unregistered kinds = %v; want [plan_note]", got)
	}
}

// Regression (issue 23, bug 2): a commit from inside a plan waited for the
// plan that makes it, and every later operation, Close included, hung. It is
// refused at once, from a host plan and from a task's, and the outer plan
// goes on.
func TestALineCallFromInsideAPlanIsRefusedAndTheOuterPlanGoesOn(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var fromTask error
		kind := simtest.StepKind("nester", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				_, fromTask = rt.Commit(ctx, func(*core.ConversationTx) error { return nil })
				return nil
			})
			return err
		})
		h := open(t, ctx, s, nil, kind)
		c := h.Root()
		var commitErr, readErr error
		r := must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			_, commitErr = c.Commit(ctx, func(tx *core.ConversationTx) error {
				core.AppendUser(tx.Tx, tx.ID, ai.UserText("nested", 0))
				return nil
			})
			_, readErr = c.Snapshot(ctx) // a store read, not a line call: allowed
			core.AppendUser(tx.Tx, tx.ID, ai.UserText("outer", 0))
			return nil
		}))
		if !errors.Is(commitErr, core.ErrNestedLineCall) || readErr != nil || r.Last != r.First {
			t.Fatalf("nested commit %v, store read %v, outer range %+v; want ErrNestedLineCall, nil and the outer entry alone", commitErr, readErr, r)
		}
		if err := c.CheckDrive(ctx); err != nil {
			t.Fatalf("the line after the refusal: %v", err)
		}
		simtest.CreateTask(t, ctx, c, kind, core.TaskSpec{})
		must(c.Drive(ctx))
		if !errors.Is(fromTask, core.ErrNestedLineCall) {
			t.Fatalf("nested commit from a task's plan = %v; want ErrNestedLineCall", fromTask)
		}
		must(0, h.Close(ctx))
	})
}

// A helper actor a task starts with its invocation's ctx is a caller of its
// own, not a nested one: under the simulated runtime, which names the
// actor, its commit made while one of the task's own holds the line waits
// for it and lands. The helper calls once the task's plan holds the line
// and yields.
func TestAnInvocationsHelperActorWaitsForTheLine(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		var helperErr error
		kind := simtest.StepKind("helped", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			holding, done := s.Runtime().NewEvent("holding"), s.Runtime().NewEvent("helper")
			s.Runtime().Go(ctx, "helper", func(ctx context.Context) {
				if err := holding.Wait(ctx); err != nil {
					helperErr = err
					return
				}
				_, helperErr = rt.Commit(ctx, func(tx *core.ConversationTx) error {
					core.AppendUser(tx.Tx, tx.ID, ai.UserText("from the helper", 0))
					return nil
				})
				done.Set()
			})
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				core.AppendUser(tx.Tx, tx.ID, ai.UserText("from the task", 0))
				holding.Set()
				sim.Yield(ctx, "holding") // the helper may run while this plan holds the line
				return nil
			}); err != nil {
				return err
			}
			return done.Wait(ctx)
		})
		h := open(t, ctx, s, nil, kind)
		c := h.Root()
		simtest.CreateTask(t, ctx, c, kind, core.TaskSpec{})
		must(c.Drive(ctx))
		if helperErr != nil {
			t.Fatalf("the helper's commit: %v; want it to wait for the task's and land", helperErr)
		}
		page := must(h.Entries(ctx, c.ID, storage.Cursor{Limit: 10}))
		var texts []string
		for _, e := range page.Items {
			if e.Kind == core.UserKind.Kind() {
				texts = append(texts, string(e.Data))
			}
		}
		if len(texts) != 2 {
			t.Fatalf("user entries %q; want the task's and the helper's", texts)
		}
		must(0, h.Close(ctx))
	})
}

// A committed batch is the plan's writes in a slice of its own: what keeps
// it (here AfterCommit) still has it whole after the next plans, which
// build theirs in the line's reused buffer.
func TestACommittedBatchKeepsItsWritesAcrossLaterPlans(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.commit(func(tx *core.Tx) {
		core.TxValue(tx, planMode.In(conv)).Set(true)
		tx.Entry(core.UserKind, conv, core.EntryDraft{Model: []ai.Message{ai.UserText("first", 0)}})
	})
	kept := f.commits[len(f.commits)-1]
	want := string(must(json.Marshal(kept)))
	for i := range 3 {
		f.commit(func(tx *core.Tx) {
			core.TxList(tx, moves.In(conv)).Append("m")
			tx.Entry(core.UserKind, conv, core.EntryDraft{Model: []ai.Message{ai.UserText("later", int64(i))}})
			tx.Entry(core.UserKind, conv, core.EntryDraft{Model: []ai.Message{ai.UserText("later", int64(i))}})
		})
	}
	if got := string(must(json.Marshal(kept))); got != want {
		t.Fatalf("the first batch after later plans:\n%s\nwant it as committed:\n%s", got, want)
	}
}
