package fault_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

type ID = storage.ID

var (
	mode = storage.ConversationValue[string]("test.mode", storage.Rewind)
	note = storage.ScratchValue[string]("test.note")

	jobKind = core.KindFuncs{Statuses: core.Statuses{Name: "test_job", Initial: "planned", Roles: map[string]storage.TaskRole{
		"planned": storage.RoleStart, "exited": storage.RoleTerminal,
	}}}
	stepKind = core.KindFuncs{Statuses: core.Statuses{Name: "test_step", Initial: "planned", Roles: map[string]storage.TaskRole{
		"planned": storage.RoleStart, "exited": storage.RoleTerminal,
	}}}
)

// process is one simulated process: a fault handle over a memory store that
// outlives it, and a commit line over the handle.
type process struct {
	s     *sim.Sim
	inner *memory.Store
	store *fault.Storage
	line  *core.Line
}

func newProcess(s *sim.Sim, inner *memory.Store, store *fault.Storage) *process {
	kinds := core.NewKinds()
	for _, k := range []core.KindFuncs{jobKind, stepKind} {
		if err := kinds.AddTask(k); err != nil {
			panic(err)
		}
	}
	return &process{s: s, inner: inner, store: store, line: core.NewLine(s.Runtime(), store, kinds, core.LineOptions{})}
}

// reopen is the restarted process: a new handle (with plan) and a new line.
func (p *process) reopen(plan fault.Plan) *process {
	return newProcess(p.s, p.inner, p.store.Reopen(plan))
}

// simulate runs body as the main actor of a seeded run over a fresh memory
// store wrapped with plan, and returns the run's trace. Unexpected errors in
// actors panic, which the simulator reports with the actor's name.
func simulate(t *testing.T, seed uint64, plan fault.Plan, body func(ctx context.Context, p *process)) *sim.Trace {
	t.Helper()
	trace := sim.NewTrace(nil, true)
	s := sim.New(sim.Options{Seed: seed, Trace: trace})
	err := s.Run(context.Background(), func(ctx context.Context) {
		inner := memory.New()
		body(ctx, newProcess(s, inner, fault.Wrap(s.Runtime(), inner, plan, s)))
	})
	if err != nil {
		t.Fatalf("seed %d, plan %s: %v", seed, plan, err)
	}
	return trace
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (p *process) conversation(ctx context.Context) ID {
	var id ID
	must(p.line.Commit(ctx, func(tx *core.Tx) error {
		id = tx.CreateConversation(core.ConversationSpec{})
		return nil
	}))
	return id
}

// say commits mode=text and a user entry saying text in one batch, and
// returns the entry id the plan minted, whether or not the commit succeeded.
func (p *process) say(ctx context.Context, conv ID, text string) (ID, storage.Range, error) {
	var id ID
	r, err := p.line.Commit(ctx, func(tx *core.Tx) error {
		core.TxValue(tx, mode.In(conv)).Set(text)
		id = core.AppendUser(tx, conv, ai.UserText(text, 0))
		return nil
	})
	return id, r, err
}

// view is what a reader sees of one conversation.
type view struct {
	LastSeq    ID
	Transcript []ID
	Entries    []ID // of the probed ids, those GetEntries finds
	Mode       string
	Context    []ID
}

// probeIDsMax is how many ids a view probes with GetEntries.
const probeIDsMax = 8

func look(ctx context.Context, store storage.Storage, conv ID) view {
	v := view{LastSeq: store.LastSeq()}
	page := must(store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv}))
	for _, e := range page.Items {
		v.Transcript = append(v.Transcript, e.ID)
	}
	var probe []ID
	for id := range ID(probeIDsMax) {
		probe = append(probe, id+1)
	}
	found := must(store.GetEntries(ctx, probe))
	for _, id := range probe {
		if found[id] != nil {
			v.Entries = append(v.Entries, id)
		}
	}
	if ver, ok := must2(store.GetValue(ctx, mode.In(conv).Address, 0)); ok {
		must(0, json.Unmarshal(ver.Value, &v.Mode))
	}
	v.Context = must(core.DeriveContext(ctx, store, conv, 0)).IDs()
	return v
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestHoldKeepsReadersOnTheOldStateUntilRelease(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "paused", Kind: fault.Hold, Commit: 3}}}
	for seed := range uint64(20) {
		var before, during, after view
		var got storage.Range
		var commitErr error
		released, releasedWhenReturned := false, false
		trace := simulate(t, seed, plan, func(ctx context.Context, p *process) {
			rt := p.s.Runtime()
			conv := p.conversation(ctx)    // commit 1: id 1
			must2(p.say(ctx, conv, "old")) // commit 2: ids 2, 3
			before = look(ctx, p.store, conv)
			wrote := rt.NewEvent("wrote")
			rt.Go(ctx, "writer", func(ctx context.Context) {
				_, got, commitErr = p.say(ctx, conv, "new") // commit 3: ids 4, 5
				releasedWhenReturned = released
				wrote.Set()
			})
			must(0, p.store.WaitHeld(ctx, "paused"))
			sim.Yield(ctx, "read") // the writer may run, and stays held
			during = look(ctx, p.store, conv)
			released = true
			p.store.Release("paused")
			must(0, wrote.Wait(ctx))
			after = look(ctx, p.store, conv)
		})
		if diff := cmp.Diff(before, during); diff != "" {
			t.Fatalf("seed %d: a reader during the hold saw more than the old state (-old +seen):\n%s", seed, diff)
		}
		want := view{LastSeq: 5, Transcript: []ID{3, 5}, Entries: []ID{3, 5}, Mode: "new", Context: []ID{3, 5}}
		if diff := cmp.Diff(want, after); diff != "" {
			t.Fatalf("seed %d: after release (-want +got):\n%s", seed, diff)
		}
		if commitErr != nil || got != (storage.Range{First: 4, Last: 5}) || !releasedWhenReturned {
			t.Fatalf("seed %d: held commit = %+v, %v, returned after release %v; want {4 5}, nil, true", seed, got, commitErr, releasedWhenReturned)
		}
		if !strings.Contains(strings.Join(trace.Lines(), "\n"), `"actor":"writer","point":"wait:fault:paused"`) {
			t.Fatalf("seed %d: the trace never resumes the writer at the hold; a hold must be a scheduling point", seed)
		}
	}
}

func TestReleaseBeforeTheHoldFiresLetsTheCommitThrough(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "early", Kind: fault.Hold, Commit: 1}}}
	var fired []fault.Firing
	trace := simulate(t, 1, plan, func(ctx context.Context, p *process) {
		p.store.Release("early")
		p.conversation(ctx)
		fired = p.store.Fired()
	})
	want := []fault.Firing{
		{Name: "early", Kind: fault.Hold, Event: fault.EventRelease},
		{Name: "early", Kind: fault.Hold, Event: fault.EventFire, Commit: 1, Batch: storage.BatchMain, FirstSeq: 1},
	}
	if diff := cmp.Diff(want, fired); diff != "" {
		t.Fatalf("firings (-want +got):\n%s", diff)
	}
	if !strings.Contains(strings.Join(trace.Lines(), "\n"), `"point":"wait:fault:early"`) {
		t.Fatal("a pre-released hold was not a scheduling point")
	}
}

func TestReopenDropsAHeldCommit(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "paused", Kind: fault.Hold, Commit: 2}}}
	simulate(t, 3, plan, func(ctx context.Context, p *process) {
		rt := p.s.Runtime()
		conv := p.conversation(ctx)
		var heldErr error
		wrote := rt.NewEvent("wrote")
		rt.Go(ctx, "writer", func(ctx context.Context) {
			_, _, heldErr = p.say(ctx, conv, "lost")
			wrote.Set()
		})
		must(0, p.store.WaitHeld(ctx, "paused"))
		q := p.reopen(fault.Plan{})
		must(0, wrote.Wait(ctx))
		if !errors.Is(heldErr, fault.ErrCrashed) {
			t.Errorf("held commit of a reopened handle = %v; want ErrCrashed", heldErr)
		}
		if got := q.store.LastSeq(); got != 1 {
			t.Errorf("lastSeq after reopen = %d; want 1 (the held batch never persisted)", got)
		}
		if id, r := must2(q.say(ctx, conv, "again")); id != 3 || r != (storage.Range{First: 2, Last: 3}) {
			t.Errorf("first commit after reopen = entry %d, %+v; want entry 3, {2 3}", id, r)
		}
		fired := p.store.Fired()
		if last := fired[len(fired)-1]; last.Event != fault.EventDrop || last.Name != "paused" || last.Persisted {
			t.Errorf("last firing = %+v; want the hold dropped, unpersisted", last)
		}
	})
}

func TestFailPersistsNothingAndTheNextCommitGetsTheSameIDs(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "refused", Kind: fault.Fail, Commit: 2}}}
	simulate(t, 1, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		lost, _, err := p.say(ctx, conv, "lost")
		var fe *fault.Error
		if !errors.Is(err, fault.ErrInjected) || !errors.As(err, &fe) || fe.Fault.Name != "refused" || fe.Commit != 2 {
			t.Errorf("failed commit = %v; want ErrInjected naming fault refused at commit 2", err)
		}
		if !strings.Contains(fmt.Sprint(err), `"refused"`) {
			t.Errorf("error %q does not name the fault", err)
		}
		if got := p.inner.LastSeq(); got != 1 {
			t.Errorf("durable lastSeq after a failed commit = %d; want 1", got)
		}
		if v := look(ctx, p.store, conv); len(v.Entries) != 0 || v.Mode != "" {
			t.Errorf("after a failed commit the reader sees %+v; want nothing of it", v)
		}
		kept, r, err := p.say(ctx, conv, "kept")
		if err != nil || kept != lost || r != (storage.Range{First: 2, Last: 3}) {
			t.Errorf("next commit = entry %d, %+v, %v; want entry %d (the failed plan's id), {2 3}", kept, r, err, lost)
		}
		want := []fault.Firing{{Name: "refused", Kind: fault.Fail, Event: fault.EventFire, Commit: 2, Batch: storage.BatchMain, FirstSeq: 2}}
		if diff := cmp.Diff(want, p.store.Fired()); diff != "" {
			t.Errorf("firings (-want +got):\n%s", diff)
		}
	})
}

func TestUncertainPersistsThenFailsAndTheHandleMustBeReopened(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "reply-lost", Kind: fault.Uncertain, Commit: 2}}}
	simulate(t, 1, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		id, _, err := p.say(ctx, conv, "durable")
		if !errors.Is(err, fault.ErrUncertain) {
			t.Errorf("uncertain commit = %v; want ErrUncertain", err)
		}
		if v := look(ctx, p.store, conv); v.LastSeq != 3 || v.Mode != "durable" || len(v.Transcript) != 1 || v.Transcript[0] != id {
			t.Errorf("after an uncertain commit the store holds %+v; want the whole batch", v)
		}
		if _, _, err := p.say(ctx, conv, "ignored"); !errors.Is(err, fault.ErrUncertain) || p.inner.LastSeq() != 3 {
			t.Errorf("commit on the uncertain handle = %v, lastSeq %d; want ErrUncertain and nothing written", err, p.inner.LastSeq())
		}
		q := p.reopen(fault.Plan{})
		if _, err := p.store.GetEntries(ctx, []ID{id}); !errors.Is(err, fault.ErrCrashed) {
			t.Errorf("read on the replaced handle = %v; want ErrCrashed", err)
		}
		if _, r, err := q.say(ctx, conv, "next"); err != nil || r != (storage.Range{First: 4, Last: 5}) {
			t.Errorf("commit after reopen = %+v, %v; want {4 5}", r, err)
		}
	})
}

// An uncertain fault on a batch the store refuses changes nothing: the
// refusal is the commit's answer, the firing says it missed, and the handle
// goes on committing.
func TestUncertainOnARefusedBatchMisses(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "reply-lost", Kind: fault.Uncertain, Commit: 2}}}
	simulate(t, 1, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		_, err := p.store.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteDeleteConversation, ID: 99}}})
		var be *storage.BatchError
		if !errors.As(err, &be) || errors.Is(err, fault.ErrUncertain) {
			t.Fatalf("refused commit = %v; want the store's BatchError", err)
		}
		if _, r, err := p.say(ctx, conv, "next"); err != nil || r != (storage.Range{First: 2, Last: 3}) {
			t.Errorf("commit after the refusal = %+v, %v; want {2 3}", r, err)
		}
		want := []fault.Firing{{Name: "reply-lost", Kind: fault.Uncertain, Event: fault.EventFire, Commit: 2, Batch: storage.BatchMain, FirstSeq: 2, Missed: true}}
		if diff := cmp.Diff(want, p.store.Fired()); diff != "" {
			t.Errorf("firings (-want +got):\n%s", diff)
		}
	})
}

// calls runs every Storage method that can fail, by name.
func calls(ctx context.Context, s storage.Storage) map[string]error {
	page := storage.Cursor{Limit: 10}
	addr := mode.In(1).Address
	errs := map[string]error{}
	_, errs["Commit"] = s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain})
	_, errs["GetConversations"] = s.GetConversations(ctx, []ID{1})
	_, errs["ScanConversations"] = s.ScanConversations(ctx, storage.ConversationQuery{Cursor: page})
	_, errs["GetEntries"] = s.GetEntries(ctx, []ID{1})
	_, errs["ScanEntries"] = s.ScanEntries(ctx, storage.EntryQuery{Cursor: page, ConversationID: 1})
	_, _, errs["NewestHead"] = s.NewestHead(ctx, 1, 0)
	_, errs["EntryKinds"] = s.EntryKinds(ctx)
	_, errs["GetTasks"] = s.GetTasks(ctx, []ID{1})
	_, errs["ScanTasks"] = s.ScanTasks(ctx, storage.TaskQuery{Cursor: page})
	_, _, errs["GetValue"] = s.GetValue(ctx, addr, 0)
	_, errs["ScanValues"] = s.ScanValues(ctx, storage.ValueQuery{Scope: addr.Scope, Namespace: addr.Namespace, Limit: 10})
	_, errs["ReadList"] = s.ReadList(ctx, addr, storage.ListQuery{Cursor: page})
	errs["Close"] = s.Close(ctx)
	return errs
}

func TestCrashKillsTheHandleAndReopenSeesTheDurableState(t *testing.T) {
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprintf("persist=%v", persist), func(t *testing.T) {
			plan := fault.Plan{Faults: []fault.Fault{{Name: "power-cut", Kind: fault.Crash, Commit: 3, Persist: persist}}}
			simulate(t, 1, plan, func(ctx context.Context, p *process) {
				conv := p.conversation(ctx)
				must2(p.say(ctx, conv, "kept"))
				before := look(ctx, p.store, conv)
				id, _, err := p.say(ctx, conv, "at the crash")
				var fe *fault.Error
				if !errors.Is(err, fault.ErrCrashed) || !errors.As(err, &fe) || fe.Fault.Name != "power-cut" {
					t.Errorf("crashing commit = %v; want ErrCrashed naming power-cut", err)
				}
				for name, err := range calls(ctx, p.store) {
					if !errors.Is(err, fault.ErrCrashed) {
						t.Errorf("%s after the crash = %v; want ErrCrashed", name, err)
					}
				}
				if got := p.store.LastSeq(); got != 3 {
					t.Errorf("LastSeq of the dead handle = %d; want 3, what the process last knew", got)
				}
				q := p.reopen(fault.Plan{})
				want := before
				if persist {
					want = view{LastSeq: 5, Transcript: []ID{3, id}, Entries: []ID{3, id}, Mode: "at the crash", Context: []ID{3, id}}
				}
				if diff := cmp.Diff(want, look(ctx, q.store, conv)); diff != "" {
					t.Errorf("reopened state (-want +got):\n%s", diff)
				}
				next, _, err := q.say(ctx, conv, "after")
				if err != nil || next != want.LastSeq+2 {
					t.Errorf("first entry after reopen = %d, %v; want %d", next, err, want.LastSeq+2)
				}
				if f := p.store.Fired(); len(f) != 1 || f[0].Persisted != persist || f[0].FirstSeq != 4 {
					t.Errorf("firings = %+v; want one crash at firstSeq 4, persisted %v", f, persist)
				}
			})
		})
	}
}

func TestUnlinkFailIsRecordedOnTheSettlingCommit(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "stuck-unlink", Kind: fault.UnlinkFail, Commit: 1}}}
	simulate(t, 1, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		var task ID
		must(p.line.Commit(ctx, func(tx *core.Tx) error {
			task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
			return nil
		}))
		must(p.line.Scratch(ctx, task, func(sc core.ScratchTx) error {
			sc.SetValue(note.Address, "working")
			return nil
		}))
		if got := p.store.UnlinkFailures(); len(got) != 0 {
			t.Errorf("unlink failures before any settle = %+v; want none", got)
		}
		r, err := p.line.Commit(ctx, func(tx *core.Tx) error {
			tx.Settle(task, "exited", nil)
			return nil
		})
		if err != nil || r != (storage.Range{First: 4, Last: 4}) {
			t.Errorf("settle = %+v, %v; want it committed at 4", r, err)
		}
		want := []fault.Firing{{Name: "stuck-unlink", Kind: fault.UnlinkFail, Event: fault.EventFire, Commit: 4,
			Batch: storage.BatchMain, FirstSeq: 4, Persisted: true, Tasks: []ID{task}}}
		if diff := cmp.Diff(want, p.store.UnlinkFailures()); diff != "" {
			t.Errorf("unlink failures (-want +got):\n%s", diff)
		}
		if _, ok := must2(p.store.GetValue(ctx, note.In(task).Address, 0)); ok {
			t.Error("retired scratch is visible after a failed unlink")
		}
	})
}

func TestOrdinalsCountCommitsOfTheSelectedBatchKind(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{
		{Name: "second-scratch", Kind: fault.Fail, Commit: 2, Batch: storage.BatchScratch},
		{Name: "fourth-main", Kind: fault.Fail, Commit: 4, Batch: storage.BatchMain},
		{Name: "third-overall", Kind: fault.Fail, Commit: 3},
	}}
	simulate(t, 1, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx) // 1: main #1
		var task ID
		must(p.line.Commit(ctx, func(tx *core.Tx) error { // 2: main #2
			task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
			return nil
		}))
		scratch := func() error {
			_, err := p.line.Scratch(ctx, task, func(sc core.ScratchTx) error { sc.SetValue(note.Address, "x"); return nil })
			return err
		}
		main := func() error { _, _, err := p.say(ctx, conv, "x"); return err }
		steps := []func() error{scratch, main, scratch, main}
		var failed []int
		for i, step := range steps {
			if err := step(); err != nil {
				if !errors.Is(err, fault.ErrInjected) {
					panic(err)
				}
				failed = append(failed, i+3)
			}
		}
		if want := []int{3, 5, 6}; !cmp.Equal(want, failed) {
			t.Errorf("failed commits = %v; want %v", failed, want)
		}
		var names []string
		for _, f := range p.store.Fired() {
			names = append(names, f.Name)
		}
		if want := []string{"third-overall", "second-scratch", "fourth-main"}; !cmp.Equal(want, names) {
			t.Errorf("fired = %v; want %v", names, want)
		}
	})
}

// A fault that names a task kind counts only the commits that settle a
// task of that kind, one made in an earlier commit or in the same batch,
// whatever else they settle.
func TestSettlesCountsTheCommitsThatSettleATaskOfItsKind(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "second-job-end", Kind: fault.Fail, Commit: 2, Settles: "test_job"}}}
	simulate(t, 1, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		start := func(k core.KindFuncs) (id ID) {
			must(p.line.Commit(ctx, func(tx *core.Tx) error {
				id = tx.Task(k, core.TaskSpec{ConversationID: conv})
				return nil
			}))
			return id
		}
		settle := func(ids ...ID) error {
			_, err := p.line.Commit(ctx, func(tx *core.Tx) error {
				for _, id := range ids {
					tx.Settle(id, "exited", nil)
				}
				return nil
			})
			return err
		}
		first, step := start(jobKind), start(stepKind)
		for _, id := range []ID{step, first} {
			if err := settle(id); err != nil {
				t.Fatalf("settling task %d: %v; only the second commit settling a test_job fails", id, err)
			}
		}
		other := start(stepKind)
		_, err := p.line.Commit(ctx, func(tx *core.Tx) error {
			tx.Settle(other, "exited", nil)
			tx.Settle(tx.Task(jobKind, core.TaskSpec{ConversationID: conv}), "exited", nil)
			return nil
		})
		if !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("the commit that makes and settles the second test_job: %v; want the injected failure", err)
		}
		if f := p.store.Fired(); len(f) != 1 || f[0].Name != "second-job-end" || f[0].Commit != 7 {
			t.Errorf("firings %+v; want second-job-end at the handle's commit 7", f)
		}
		if got := plan.Faults[0].String(); got != `fail "second-job-end" at settling test_job commit 2` {
			t.Errorf("the fault reads %q", got)
		}
	})
}

func TestCloseLeavesTheDurableStoreToReopen(t *testing.T) {
	simulate(t, 1, fault.Plan{}, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		if err := p.store.Close(ctx); err != nil {
			t.Errorf("close = %v", err)
		}
		for name, err := range calls(ctx, p.store) {
			if !errors.Is(err, storage.ErrClosed) {
				t.Errorf("%s after close = %v; want storage.ErrClosed", name, err)
			}
		}
		q := p.reopen(fault.Plan{})
		if got := look(ctx, q.store, conv); got.LastSeq != 1 {
			t.Errorf("reopened after close: lastSeq %d; want 1", got.LastSeq)
		}
	})
}

// traceFault is a fault event as the sim trace holds it.
type traceFault struct {
	K      string       `json:"k"`
	Actor  string       `json:"actor"`
	Detail fault.Firing `json:"detail"`
}

func TestFaultsAreWrittenToTheSimTrace(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{
		{Name: "paused", Kind: fault.Hold, Commit: 2},
		{Name: "refused", Kind: fault.Fail, Commit: 3},
	}}
	run := func() *sim.Trace {
		return simulate(t, 5, plan, func(ctx context.Context, p *process) {
			rt := p.s.Runtime()
			conv := p.conversation(ctx)
			wrote := rt.NewEvent("wrote")
			rt.Go(ctx, "writer", func(ctx context.Context) {
				must2(p.say(ctx, conv, "held"))
				if _, _, err := p.say(ctx, conv, "refused"); !errors.Is(err, fault.ErrInjected) {
					panic(err)
				}
				wrote.Set()
			})
			must(0, p.store.WaitHeld(ctx, "paused"))
			p.store.Release("paused")
			must(0, wrote.Wait(ctx))
		})
	}
	trace := run()
	var got []traceFault
	for _, line := range trace.Lines() {
		if strings.HasPrefix(line, `{"k":"fault"`) {
			var f traceFault
			must(0, json.Unmarshal([]byte(line), &f))
			got = append(got, f)
		}
	}
	held := fault.Firing{Name: "paused", Kind: fault.Hold, Commit: 2, Batch: storage.BatchMain, FirstSeq: 2}
	fire, release := held, held
	fire.Event, release.Event = fault.EventFire, fault.EventRelease
	want := []traceFault{
		{K: "fault", Actor: "writer", Detail: fire},
		{K: "fault", Actor: "main", Detail: release},
		{K: "fault", Actor: "writer", Detail: fault.Firing{Name: "refused", Kind: fault.Fail, Event: fault.EventFire, Commit: 3, Batch: storage.BatchMain, FirstSeq: 4}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("fault events in the trace (-want +got):\n%s", diff)
	}
	if again := run(); again.Digest() != trace.Digest() {
		t.Fatal("the same seed and plan gave a different trace")
	}
}

func TestPlanJSONRoundTrips(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{
		{Name: "paused", Kind: fault.Hold, Commit: 2},
		{Name: "refused", Kind: fault.Fail, Commit: 1, Batch: storage.BatchScratch},
		{Name: "reply-lost", Kind: fault.Uncertain, Commit: 3, Batch: storage.BatchMain},
		{Name: "power-cut", Kind: fault.Crash, Commit: 4, Persist: true},
		{Name: "stuck-unlink", Kind: fault.UnlinkFail, Commit: 1},
		{Name: "end-of-b", Kind: fault.Crash, Commit: 2, Batch: storage.BatchMain, Settles: "b"},
	}}
	const canonical = `{"faults":[` +
		`{"name":"paused","kind":"hold","commit":2},` +
		`{"name":"refused","kind":"fail","commit":1,"batch":"scratch"},` +
		`{"name":"reply-lost","kind":"uncertain","commit":3,"batch":"main"},` +
		`{"name":"power-cut","kind":"crash","commit":4,"persist":true},` +
		`{"name":"stuck-unlink","kind":"unlinkFail","commit":1},` +
		`{"name":"end-of-b","kind":"crash","commit":2,"batch":"main","settles":"b"}]}`
	if got := plan.String(); got != canonical {
		t.Fatalf("plan.String() = %s; want %s", got, canonical)
	}
	back, err := fault.ParsePlan([]byte(canonical))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plan, back); diff != "" {
		t.Fatalf("parsed plan (-want +got):\n%s", diff)
	}
	empty, err := fault.ParsePlan([]byte(fault.Plan{}.String()))
	if err != nil || len(empty.Faults) != 0 || (fault.Plan{}).String() != `{"faults":[]}` {
		t.Fatalf("empty plan: %s parses to %+v, %v", fault.Plan{}, empty, err)
	}
}

func TestParsePlanNamesTheOffendingField(t *testing.T) {
	long := strings.Repeat("x", fault.NameLenMax+1)
	for _, tc := range []struct {
		name, input string
		index       int    // for a *PlanError
		field       string // for a *PlanError; "" means a decode error
		mention     string // the message must contain it
	}{
		{"unknown kind", `{"faults":[{"name":"a","kind":"boom","commit":1}]}`, 0, "kind", `"boom"`},
		{"missing kind", `{"faults":[{"name":"a","commit":1}]}`, 0, "kind", "unknown kind"},
		{"commit zero", `{"faults":[{"name":"a","kind":"fail","commit":0}]}`, 0, "commit", "0"},
		{"commit missing", `{"faults":[{"name":"a","kind":"fail"}]}`, 0, "commit", "ordinal"},
		{"commit negative", `{"faults":[{"name":"a","kind":"fail","commit":-2}]}`, 0, "commit", "-2"},
		{"duplicate name", `{"faults":[{"name":"a","kind":"fail","commit":1},{"name":"a","kind":"crash","commit":2}]}`, 1, "name", "faults[0]"},
		{"hold without a name", `{"faults":[{"kind":"hold","commit":1}]}`, 0, "name", "Release"},
		{"fail without a name", `{"faults":[{"name":"","kind":"fail","commit":1}]}`, 0, "name", "every fault is named"},
		{"name with a comma", `{"faults":[{"name":"a,b","kind":"fail","commit":1}]}`, 0, "name", `"a,b"`},
		{"name too long", `{"faults":[{"name":"` + long + `","kind":"fail","commit":1}]}`, 0, "name", "longer"},
		{"unknown batch", `{"faults":[{"name":"a","kind":"fail","commit":1,"batch":"side"}]}`, 0, "batch", `"side"`},
		{"unlink of scratch", `{"faults":[{"name":"a","kind":"unlinkFail","commit":1,"batch":"scratch"}]}`, 0, "batch", "settle"},
		{"settles in scratch", `{"faults":[{"name":"a","kind":"crash","commit":1,"batch":"scratch","settles":"b"}]}`, 0, "batch", "settle"},
		{"settles no kind", `{"faults":[{"name":"a","kind":"crash","commit":1,"settles":"two words"}]}`, 0, "settles", `"two words"`},
		{"persist on fail", `{"faults":[{"name":"a","kind":"fail","commit":1,"persist":true}]}`, 0, "persist", "crash"},
		{"unknown fault field", `{"faults":[{"name":"a","kind":"crash","commit":1,"persists":true}]}`, 0, "", `unknown field "persists"`},
		{"unknown plan field", `{"fault":[]}`, 0, "", `unknown field "fault"`},
		{"wrong type", `{"faults":[{"name":"a","kind":"fail","commit":"1"}]}`, 0, "", "commit"},
		{"trailing data", `{"faults":[]} {}`, 0, "", "after"},
		{"not JSON", `faults: []`, 0, "", "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fault.ParsePlan([]byte(tc.input))
			if err == nil {
				t.Fatalf("ParsePlan(%s) succeeded; want an error", tc.input)
			}
			if !strings.HasPrefix(err.Error(), "fault: plan: ") || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q; want it prefixed \"fault: plan: \" and mentioning %q", err, tc.mention)
			}
			var pe *fault.PlanError
			switch {
			case tc.field == "" && errors.As(err, &pe):
				t.Fatalf("error %v is a PlanError; want a decode error", err)
			case tc.field != "" && (!errors.As(err, &pe) || pe.Index != tc.index || pe.Field != tc.field):
				t.Fatalf("error %v; want a PlanError on faults[%d].%s", err, tc.index, tc.field)
			}
		})
	}
	t.Run("too many faults", func(t *testing.T) {
		var p fault.Plan
		for i := range fault.FaultsMax + 1 {
			p.Faults = append(p.Faults, fault.Fault{Name: fmt.Sprint("f", i), Kind: fault.Fail, Commit: 1})
		}
		var pe *fault.PlanError
		if err := p.Validate(); !errors.As(err, &pe) || pe.Index != -1 || pe.Field != "faults" {
			t.Fatalf("Validate of %d faults = %v; want a PlanError on faults", len(p.Faults), err)
		}
	})
}

func TestRandomPlanIsFixedBySeedAndAlwaysValid(t *testing.T) {
	const seeds, commits = 300, 12
	distinct := map[string]bool{}
	for seed := range uint64(seeds) {
		draw := func() fault.Plan { return fault.RandomPlan(rand.New(rand.NewPCG(seed, 7)), commits) }
		p := draw()
		if diff := cmp.Diff(p, draw()); diff != "" {
			t.Fatalf("seed %d drew two plans (-first +second):\n%s", seed, diff)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d drew an invalid plan %s: %v", seed, p, err)
		}
		back, err := fault.ParsePlan([]byte(p.String()))
		if err != nil || !cmp.Equal(p, back, cmpopts.EquateEmpty()) {
			t.Fatalf("seed %d: plan %s does not round-trip: %+v, %v", seed, p, back, err)
		}
		enders := 0
		for _, f := range p.Faults {
			if f.Kind == fault.Hold || f.Commit < 1 || f.Commit > commits {
				t.Fatalf("seed %d drew %s; want no holds and ordinals in 1..%d", seed, f, commits)
			}
			if f.Kind == fault.Crash || f.Kind == fault.Uncertain {
				enders++
			}
		}
		if enders > 1 {
			t.Fatalf("seed %d drew %s: more than one crash or uncertain fault", seed, p)
		}
		distinct[p.String()] = true
	}
	if len(distinct) < seeds/3 {
		t.Fatalf("%d seeds drew only %d distinct plans", seeds, len(distinct))
	}
}

func TestRandomPlansRunUnderTheSimulator(t *testing.T) {
	// Every drawn plan runs a fixed workload to the end: faults end commits
	// with their sentinels, never with a panic or a deadlock.
	const seeds = 50
	fired := 0
	for seed := range uint64(seeds) {
		plan := fault.RandomPlan(rand.New(rand.NewPCG(seed, 7)), 6)
		trace := simulate(t, seed, plan, func(ctx context.Context, p *process) {
			var conv, task ID
			steps := []func() error{
				func() error {
					_, err := p.line.Commit(ctx, func(tx *core.Tx) error {
						conv = tx.CreateConversation(core.ConversationSpec{})
						task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
						return nil
					})
					return err
				},
				func() error { _, _, err := p.say(ctx, conv, "a"); return err },
				func() error {
					_, err := p.line.Scratch(ctx, task, func(sc core.ScratchTx) error { sc.SetValue(note.Address, "x"); return nil })
					return err
				},
				func() error {
					_, err := p.line.Commit(ctx, func(tx *core.Tx) error { tx.Settle(task, "exited", nil); return nil })
					return err
				},
				func() error { _, _, err := p.say(ctx, conv, "b"); return err },
			}
			for _, step := range steps {
				err := step()
				switch {
				case err == nil, errors.Is(err, fault.ErrInjected), core.RuleOf(err) != "":
					// Refused, or rejected because a refused step created nothing.
				case errors.Is(err, fault.ErrCrashed), errors.Is(err, fault.ErrUncertain):
					p = p.reopen(fault.Plan{})
				default:
					panic(fmt.Sprintf("plan %s: %v", plan, err))
				}
			}
		})
		for _, line := range trace.Lines() {
			if strings.HasPrefix(line, `{"k":"fault"`) {
				fired++
			}
		}
	}
	if fired < seeds/2 {
		t.Fatalf("%d seeds fired only %d faults; the workload does not exercise the plans", seeds, fired)
	}
}

func TestProgrammerErrorsPanicNamingTheRule(t *testing.T) {
	expectPanic := func(t *testing.T, want string, fn func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Fatalf("panic = %v; want one mentioning %q", r, want)
			}
		}()
		fn()
	}
	rt := core.RealRuntime()
	t.Run("invalid plan", func(t *testing.T) {
		expectPanic(t, "invalid plan", func() {
			fault.Wrap(rt, memory.New(), fault.Plan{Faults: []fault.Fault{{Name: "x", Kind: "boom", Commit: 1}}}, nil)
		})
	})
	t.Run("release of no hold", func(t *testing.T) {
		s := fault.Wrap(rt, memory.New(), fault.Plan{Faults: []fault.Fault{{Name: "x", Kind: fault.Fail, Commit: 1}}}, nil)
		expectPanic(t, "no hold", func() { s.Release("x") })
	})
	t.Run("reopen twice", func(t *testing.T) {
		s := fault.Wrap(rt, memory.New(), fault.Plan{}, nil)
		s.Reopen(fault.Plan{})
		expectPanic(t, "twice", func() { s.Reopen(fault.Plan{}) })
	})
}
