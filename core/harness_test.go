package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

func TestOpenCreatesTheRootOnlyOnEmptyStorage(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		h := open(t, ctx, s, store)
		root := h.Root().ID
		if root != 1 || store.LastSeq() != 1 {
			t.Fatalf("root %d, lastSeq %d; want root 1 created by open", root, store.LastSeq())
		}
		h.Close(ctx)
		h2 := open(t, ctx, s, store)
		if h2.Root().ID != root || store.LastSeq() != 1 {
			t.Fatalf("reopen: root %d, lastSeq %d; want the same root and no write", h2.Root().ID, store.LastSeq())
		}
		h2.Close(ctx)
	})
}

// countingStore counts calls per method.
type countingStore struct {
	simtest.Reopenable
	calls map[string]int
}

func (c *countingStore) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	c.calls["ScanEntries"]++
	return c.Reopenable.ScanEntries(ctx, q)
}

func (c *countingStore) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	c.calls["GetEntries"]++
	return c.Reopenable.GetEntries(ctx, ids)
}

func TestOpenReportsUnregisteredEntryKindsWithoutReadingEntries(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		plugin := storage.DefineEntryKind[map[string]int]("pin_context")
		inner := simtest.Reopenable{Store: memory.New()}
		h, err := core.Open(ctx, inner, core.Options{Runtime: s.Runtime(), EntryKinds: []storage.Kinder{plugin}})
		if err != nil {
			t.Fatal(err)
		}
		conv := h.Root()
		var u2 ID
		must(conv.Commit(ctx, func(tx *core.ConversationTx) error {
			core.AppendUser(tx.Tx, tx.ID, ai.UserText("u1", 0))
			u2 = core.AppendUser(tx.Tx, tx.ID, ai.UserText("u2", 0))
			return nil
		}))
		must(conv.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Entry(plugin, core.EntryDraft{Model: []ai.Message{ai.UserText("pinned", 0)}, Head: u2})
			return nil
		}))
		want := must(core.DeriveContext(ctx, h.Store(), conv.ID, 0)).IDs()
		h.Close(ctx)

		counting := &countingStore{Reopenable: inner, calls: map[string]int{}}
		h2 := open(t, ctx, s, counting)
		if got := h2.UnregisteredEntryKinds(); !slices.Equal(got, []string{"pin_context"}) {
			t.Fatalf("unregistered = %v; want [pin_context]", got)
		}
		if counting.calls["ScanEntries"]+counting.calls["GetEntries"] != 0 {
			t.Fatalf("open read entries: %v", counting.calls)
		}
		if got := must(core.DeriveContext(ctx, h2.Store(), conv.ID, 0)).IDs(); !slices.Equal(got, want) {
			t.Fatalf("context without the kind = %v; want %v", got, want)
		}
		h2.Close(ctx)
	})
}

func TestOpenRejectsALiveTaskOfAnUnknownKind(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("ghost", nil)
		store := simtest.Reopenable{Store: memory.New()}
		h := open(t, ctx, s, store, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		h.Close(ctx)
		_, err := core.Open(ctx, store, core.Options{Runtime: s.Runtime()})
		var uk *core.UnknownKindError
		if !errors.As(err, &uk) || uk.Task != id || uk.Kind != "ghost" {
			t.Fatalf("open = %v; want UnknownKindError for task %d (ghost)", err, id)
		}
		// Registering the kind (or a replacement under its name) opens it.
		open(t, ctx, s, store, kind).Close(ctx)
	})
}

func TestReplaceSwapsAKindByNameAndAddingTwiceRejects(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		orig, repl := simtest.StepKind("work", nil), simtest.StepKind("work", nil)
		repl.Statuses.Roles = map[string]storage.TaskRole{"planned": storage.RoleStart, "done": storage.RoleTerminal, "extra": storage.RoleTerminal}
		h, err := core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{orig}, Replace: []core.TaskKind{repl}})
		if err != nil {
			t.Fatal(err)
		}
		k, _ := h.Kinds().Task("work")
		if _, ok := k.Role("extra"); !ok {
			t.Fatal("Kinds().Task(work) is not the replacement")
		}
		h.Close(ctx)
		if _, err := core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{orig, orig}}); err == nil {
			t.Fatal("adding a kind twice without Replace was accepted")
		}
		if _, err := core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), Replace: []core.TaskKind{orig}}); err == nil {
			t.Fatal("replacing an unregistered kind was accepted")
		}
	})
}

func TestConfigRoundTripsTheValuesAKindDeclares(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("planner", nil)
		kind.ConfigValues = map[string]storage.Address{
			"mode":  storage.ConversationValue[string]("plan.mode", storage.Rewind).Address,
			"depth": storage.ConversationValue[int]("plan.depth", storage.Sticky).Address,
		}
		h := open(t, ctx, s, nil, kind)
		cfg := must(h.Root().Config(kind))
		if err := cfg.Set(ctx, map[string]any{"mode": "careful", "depth": 3}); err != nil {
			t.Fatal(err)
		}
		got := must(cfg.Get(ctx))
		if string(got["mode"]) != `"careful"` || string(got["depth"]) != "3" || len(got) != 2 {
			t.Fatalf("config = %v; want mode careful and depth 3", got)
		}
		if err := cfg.Set(ctx, map[string]any{"colour": "red"}); err == nil {
			t.Fatal("setting an undeclared value was accepted")
		}
		if _, err := h.Root().Config(storage.DefineEntryKind[struct{}]("nobody")); err == nil {
			t.Fatal("the config of an unregistered kind was returned")
		}
		h.Close(ctx)
	})
}

func TestScopedHooksRunAfterHarnessWideOnesInnermostLast(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var order []string
		var childConv ID
		kind := simtest.StepKind("probe", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if task.ConversationID == childConv {
				order = nil
				if _, err := rt.RunHooks(ctx, kind, "point", nil); err != nil {
					return err
				}
			}
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		root := h.Root()
		var owner ID
		must(root.Commit(ctx, func(tx *core.ConversationTx) error {
			owner = tx.Task(kind, core.TaskSpec{Background: true})
			childConv = tx.CreateConversation(core.ConversationSpec{Owner: owner})
			tx.Tx.Task(kind, core.TaskSpec{ConversationID: childConv})
			return nil
		}))
		record := func(name string) core.HookHandler {
			return func(context.Context, any) (any, error) { order = append(order, name); return nil, nil }
		}
		child := must(h.Conversation(ctx, childConv))
		child.Hooks().On(kind, "point", record("child"), core.HookOptions{})
		root.Hooks().On(kind, "point", record("root-subtree"), core.HookOptions{Subtree: true})
		root.Hooks().On(kind, "point", record("root-only"), core.HookOptions{})
		h.Hooks().On(kind, "point", record("harness"), core.HookOptions{})
		off := h.Hooks().On(kind, "point", record("removed"), core.HookOptions{})
		off()
		must(h.Drive(ctx))
		if want := []string{"harness", "root-subtree", "child"}; !slices.Equal(order, want) {
			t.Fatalf("hook order = %v; want %v", order, want)
		}
		h.Close(ctx)
	})
}

func TestStaleAndForeignTaskIdentitiesReject(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		var kept *core.TaskRuntime
		var keptCtx context.Context
		var foreignErr error
		kind := simtest.StepKind("keeper", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if kept != nil {
				// another invocation's runtime with this invocation's ctx
				_, foreignErr = kept.Commit(ctx, func(*core.ConversationTx) error { return nil })
			}
			kept, keptCtx = rt, ctx
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		a := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{After: []ID{a}})
		must(h.Root().Drive(ctx))
		if !errors.Is(foreignErr, core.ErrStaleInvocation) {
			t.Fatalf("foreign runtime = %v; want ErrStaleInvocation", foreignErr)
		}
		_, err := kept.Commit(keptCtx, func(tx *core.ConversationTx) error { core.AppendUser(tx.Tx, tx.ID, ai.UserText("late", 0)); return nil })
		if !errors.Is(err, core.ErrStaleInvocation) {
			t.Fatalf("stale runtime = %v; want ErrStaleInvocation", err)
		}
		// Regression (issue 23): its reads and its clock check the
		// identity too; with the host's ctx a stale runtime read before.
		_, _, getTask := kept.GetTask(ctx, a)
		_, getTasks := kept.GetTasks(ctx, []ID{a})
		_, _, getEntry := kept.GetEntry(ctx, 1)
		sleep := kept.Sleep(ctx, s.Now())
		for name, err := range map[string]error{"GetTask": getTask, "GetTasks": getTasks, "GetEntry": getEntry, "Sleep": sleep} {
			if !errors.Is(err, core.ErrStaleInvocation) {
				t.Fatalf("stale runtime's %s with a foreign ctx = %v; want ErrStaleInvocation", name, err)
			}
		}
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "stale runtime") {
					t.Fatalf("stale runtime's Now panicked with %v; want it named stale", p)
				}
			}()
			kept.Now()
		}()
		h.Close(ctx)
	})
}

func TestLifecycleCallsFromATaskReject(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var h *core.Harness
		var errs []error
		kind := simtest.StepKind("rogue", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			_, e1 := h.Drive(ctx)
			errs = append(errs, e1, h.Close(ctx), h.Shutdown(ctx))
			return nil
		})
		h = open(t, ctx, s, nil, kind)
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		for i, err := range errs {
			if !errors.Is(err, core.ErrLifecycleFromTask) {
				t.Errorf("call %d = %v; want ErrLifecycleFromTask", i, err)
			}
		}
		h.Close(ctx)
	})
}

func TestCloseStopsAdmissionAndRepeatedCloseShares(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		blocked := rt.NewEvent("blocked")
		kind := simtest.StepKind("long", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			blocked.Set()
			return rt.NewEvent("never").Wait(ctx) // returns when close signals it
		})
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		var result core.DriveResult
		drove := rt.NewEvent("drove")
		rt.Go(ctx, "driver", func(ctx context.Context) {
			result = must(h.Root().Drive(ctx))
			drove.Set()
		})
		blocked.Wait(ctx)
		closed := rt.NewEvent("closed-too")
		rt.Go(ctx, "closer2", func(ctx context.Context) {
			if err := h.Close(ctx); err != nil {
				t.Errorf("second close = %v", err)
			}
			closed.Set()
		})
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		closed.Wait(ctx)
		drove.Wait(ctx)
		if result != core.Closed {
			t.Fatalf("drive ended %s; want closed", result)
		}
		if _, err := h.Commit(ctx, func(*core.Tx) error { return nil }); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("commit after close = %v; want ErrClosed", err)
		}
		if r := must(h.Drive(ctx)); r != core.Closed {
			t.Fatalf("drive after close = %s; want closed", r)
		}
		if _, _, err := h.GetTask(ctx, id); !errors.Is(err, storage.ErrClosed) {
			t.Fatalf("read after close = %v; want storage.ErrClosed (close closes storage)", err)
		}
	})
}

func TestShutdownMarksLiveTasksRunsCleanupAndCloses(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		kind := simtest.StepKind("long", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			return rt.NewEvent("never").Wait(ctx)
		})
		store := simtest.Reopenable{Store: memory.New()}
		h := open(t, ctx, s, store, kind)
		queue := storage.ConversationList[string]("pi.inbox", storage.Sticky).In(h.Root().ID)
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error { tx.Append(queue.Address, "queued"); return nil }))
		running := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		idle := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{After: []ID{running}})
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Root().Drive(ctx) })
		rt.Sleep(ctx, 1) // let the first task start
		if err := h.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []ID{running, idle} {
			got := must(store.GetTasks(ctx, []ID{id}))[id]
			if got.Status != "aborted" || !got.Abort {
				t.Fatalf("task %d after shutdown = %s (abort %v); want aborted", id, got.Status, got.Abort)
			}
		}
		p := must(store.ReadList(ctx, queue.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}}))
		if len(p.Items) != 1 {
			t.Fatalf("queued items after shutdown = %d; want 1 (untouched)", len(p.Items))
		}
		if _, err := h.Commit(ctx, func(*core.Tx) error { return nil }); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("commit after shutdown = %v; want ErrClosed", err)
		}
	})
}

func TestDeleteConversationRejectsLiveWorkInItsSubtree(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("work", nil)
		h := open(t, ctx, s, nil, kind)
		var owner, child ID
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			owner = tx.Task(kind, core.TaskSpec{Background: true})
			child = tx.CreateConversation(core.ConversationSpec{Owner: owner})
			tx.Tx.Task(kind, core.TaskSpec{ConversationID: child})
			return nil
		}))
		var busy *core.ConversationBusyError
		if err := h.DeleteConversation(ctx, h.Root().ID); !errors.As(err, &busy) || busy.Conversation != h.Root().ID || busy.Busy != h.Root().ID || busy.Task != 0 {
			t.Fatalf("delete with live tasks in the subtree = %v; want a ConversationBusyError naming the root's own", err)
		}
		must(h.Drive(ctx))
		// Idle means no live foreground task; invocation slots are released
		// when methods actually return. Let them return (a virtual sleep runs
		// every runnable actor first), then delete.
		s.Runtime().Sleep(ctx, time.Millisecond)
		if err := h.DeleteConversation(ctx, child); err != nil {
			t.Fatalf("delete of a finished child = %v", err)
		}
		if _, err := h.Conversation(ctx, child); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("deleted conversation lookup = %v; want ErrNotFound", err)
		}
		last := h.Store().LastSeq()
		for _, gone := range []ID{child, last + 100} {
			err := h.DeleteConversation(ctx, gone)
			if !errors.Is(err, core.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("conversation %d", gone)) {
				t.Fatalf("delete of conversation %d, which does not exist = %v; want ErrNotFound naming it", gone, err)
			}
		}
		if got := h.Store().LastSeq(); got != last {
			t.Fatalf("refused deletes moved the last sequence from %d to %d", last, got)
		}
		if _, err := h.Conversation(ctx, h.Root().ID); err != nil {
			t.Fatalf("the root after refused deletes = %v", err)
		}
		h.Close(ctx)
	})
}

func TestConversationsFilterForksOwnedAndIndependent(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("work", nil)
		h := open(t, ctx, s, nil, kind)
		root := h.Root()
		var e, fork, owned ID
		must(root.Commit(ctx, func(tx *core.ConversationTx) error {
			e = core.AppendUser(tx.Tx, tx.ID, ai.UserText("x", 0))
			owner := tx.Task(kind, core.TaskSpec{Background: true})
			owned = tx.CreateConversation(core.ConversationSpec{Owner: owner})
			return nil
		}))
		fork = must(root.Fork(ctx, e, core.ForkOptions{})).ID
		ids := func(p storage.Page[storage.Conversation]) []ID {
			var out []ID
			for _, c := range p.Items {
				out = append(out, c.ID)
			}
			return out
		}
		lim := storage.Cursor{Limit: 10}
		if got := ids(must(h.Conversations(ctx, core.ConversationFilter{Cursor: lim, Parent: root.ID}))); !slices.Equal(got, []ID{fork}) {
			t.Fatalf("forks = %v; want [%d]", got, fork)
		}
		if got := ids(must(h.Conversations(ctx, core.ConversationFilter{Cursor: lim, OwnedFrom: root.ID}))); !slices.Equal(got, []ID{owned}) {
			t.Fatalf("owned = %v; want [%d]", got, owned)
		}
		if got := ids(must(h.Conversations(ctx, core.ConversationFilter{Cursor: lim, Independent: true}))); !slices.Equal(got, []ID{root.ID, fork}) {
			t.Fatalf("independent = %v; want [%d %d]", got, root.ID, fork)
		}
		// Regression (issue 23, bug 5): the filter fills the page past the
		// owned conversation between root and fork instead of cutting it.
		two := must(h.Conversations(ctx, core.ConversationFilter{Cursor: storage.Cursor{Limit: 2}, Independent: true}))
		if !slices.Equal(ids(two), []ID{root.ID, fork}) || two.Next != 0 {
			t.Fatalf("independent, limit 2 = %v next %d; want [%d %d] and no next page", ids(two), two.Next, root.ID, fork)
		}
		one := must(h.Conversations(ctx, core.ConversationFilter{Cursor: storage.Cursor{Limit: 1}, Independent: true}))
		rest := must(h.Conversations(ctx, core.ConversationFilter{Cursor: storage.Cursor{Limit: 1, After: one.Next}, Independent: true}))
		if !slices.Equal(ids(one), []ID{root.ID}) || one.Next == 0 || !slices.Equal(ids(rest), []ID{fork}) || rest.Next != 0 {
			t.Fatalf("independent by one: %v next %d, then %v next %d; want the root, then the fork, then nothing", ids(one), one.Next, ids(rest), rest.Next)
		}
		back := must(h.Conversations(ctx, core.ConversationFilter{Cursor: storage.Cursor{Limit: 1, Before: fork + 1}, Independent: true}))
		if !slices.Equal(ids(back), []ID{fork}) || back.Next == 0 {
			t.Fatalf("independent backward = %v next %d; want the fork and more before it", ids(back), back.Next)
		}
		h.Close(ctx)
	})
}

func TestForkWithAbortMarksTheSourceForegroundInTheSameCommit(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("work", nil)
		h := open(t, ctx, s, nil, kind)
		root := h.Root()
		var e, fg, bg ID
		must(root.Commit(ctx, func(tx *core.ConversationTx) error {
			e = core.AppendUser(tx.Tx, tx.ID, ai.UserText("x", 0))
			fg = tx.Task(kind, core.TaskSpec{})
			bg = tx.Task(kind, core.TaskSpec{Background: true})
			return nil
		}))
		before := h.Store().LastSeq()
		fork := must(root.Fork(ctx, e, core.ForkOptions{Abort: true}))
		tasks := must(h.GetTasks(ctx, []ID{fg, bg}))
		if !tasks[fg].Abort || tasks[bg].Abort {
			t.Fatalf("after fork with abort: foreground marked %v, background marked %v; want true, false", tasks[fg].Abort, tasks[bg].Abort)
		}
		if fork.ID != before+1 || h.Store().LastSeq() != before+2 {
			t.Fatalf("fork %d, lastSeq %d→%d; want one commit of two writes", fork.ID, before, h.Store().LastSeq())
		}
		h.Close(ctx)
	})
}

func TestDeleteRejectsAnOutstandingTerminalInvocation(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		settled, release := rt.NewEvent("settled"), rt.NewEvent("release")
		kind := core.KindFuncs{Statuses: core.Statuses{Name: "lingering", Initial: "planned", Roles: simtest.TaskRoles},
			ExecuteFunc: func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				if _, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil }); err != nil {
					return err
				}
				settled.Set()
				return release.Wait(ctx) // terminal, but its method has not returned
			}}
		ownerKind := simtest.StepKind("owner", nil)
		h := open(t, ctx, s, nil, kind, ownerKind)
		var child ID
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			owner := tx.Task(ownerKind, core.TaskSpec{Background: true})
			child = tx.CreateConversation(core.ConversationSpec{Owner: owner})
			return nil
		}))
		c := must(h.Conversation(ctx, child))
		simtest.CreateTask(t, ctx, c, kind, core.TaskSpec{})
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Drive(ctx) })
		settled.Wait(ctx)
		var busy *core.ConversationBusyError
		if err := h.DeleteConversation(ctx, child); !errors.As(err, &busy) || busy.Conversation != child || busy.Busy != child || busy.Task == 0 {
			t.Fatalf("delete with an outstanding invocation in the subtree = %v; want a ConversationBusyError naming its task", err)
		}
		release.Set()
		rt.Sleep(ctx, time.Millisecond)
		if err := h.DeleteConversation(ctx, child); err != nil {
			t.Fatalf("delete after the invocation returned = %v", err)
		}
		h.Close(ctx)
	})
}

// A session has one writer: a second harness on a store an open harness
// holds is refused with a LockedError, and the store is free again once the
// first harness closes (also when it faulted: its closer releases it).
func TestASecondHarnessOnALiveStoreIsRefused(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := memory.New()
		h := open(t, ctx, s, store)
		_, err := core.Open(ctx, store, core.Options{Runtime: s.Runtime()})
		var le *storage.LockedError
		if !errors.As(err, &le) || !errors.Is(err, storage.ErrLocked) {
			t.Fatalf("a second harness on a live store = %v; want a LockedError", err)
		}
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			core.AppendUser(tx.Tx, tx.ID, ai.UserText("the first harness still writes", 0))
			return nil
		}))
		must(0, h.Close(ctx))
	})
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		h := open(t, ctx, s, store)
		must(0, h.Close(ctx))
		h2 := open(t, ctx, s, store) // released by the first harness's close
		must(0, h2.Close(ctx))
	})
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		broken := simtest.StepKind("broken", func(context.Context, *storage.Task, *core.TaskRuntime) error {
			return errors.New("a contract fault")
		})
		store := simtest.Reopenable{Store: memory.New()}
		h := open(t, ctx, s, store, broken)
		simtest.CreateTask(t, ctx, h.Root(), broken, core.TaskSpec{})
		var fe *core.FaultError
		if _, err := h.Root().Drive(ctx); !errors.As(err, &fe) {
			t.Fatalf("drive = %v; want the fault", err)
		}
		_ = h.Close(ctx) // joins the closer, which released the store
		h2 := open(t, ctx, s, store, simtest.StepKind("broken", nil))
		must(0, h2.Close(ctx))
	})
}

// Misuse that used to panic is an error (issue 23).
func TestOpenWithoutAStoreIsAnError(t *testing.T) {
	if _, err := core.Open(context.Background(), nil, core.Options{}); !errors.Is(err, core.ErrNoStore) {
		t.Fatalf("Open(nil) = %v; want ErrNoStore", err)
	}
}
