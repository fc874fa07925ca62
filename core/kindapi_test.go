package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The doors of the kernel's kind API, one test each: what a package of
// kinds registers (rules, watched state, abort composition, extensions) and
// what a kind calls (reports, hook chains, pending entries, busy, marks,
// invocation identity, the self-drive check, typed rejections, canonical
// JSON, whole lists, the system fold's merge).

var forbidden = storage.ConversationValue[string]("plugin.mode", storage.Sticky)

// noForbidden is a plugin's batch rule: "forbidden" is never a mode.
func noForbidden(ctx context.Context, before storage.Storage, b storage.CommitBatch) error {
	for _, w := range b.Writes {
		if w.Type == storage.WriteValueSet && w.Addr.Namespace == forbidden.Namespace && string(w.Value) == `"forbidden"` {
			return core.Rejectf("plugin-mode", 0, "%s: forbidden is not a mode", w.Addr)
		}
	}
	return nil
}

func TestARegisteredBatchRuleRejectsOnTheLineAndInValidateBatch(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := memory.New()
		h := must(core.Open(ctx, store, core.Options{Runtime: s.Runtime(), Rules: []core.BatchRule{noForbidden}, CheckInvariants: true}))
		c := h.Root()
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.SetValue(forbidden.Address, "careful"); return nil }))
		last := store.LastSeq()
		_, err := c.Commit(ctx, func(tx *core.ConversationTx) error { tx.SetValue(forbidden.Address, "forbidden"); return nil })
		if core.RuleOf(err) != "plugin-mode" || store.LastSeq() != last {
			t.Fatalf("commit = %v, lastSeq %d; want the plugin's rule and nothing written (%d)", err, store.LastSeq(), last)
		}
		addr := forbidden.In(c.ID).Address
		batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteValueSet, Addr: &addr, Value: json.RawMessage(`"forbidden"`)}}}
		if err := core.ValidateBatch(ctx, store, batch); err != nil {
			t.Fatalf("ValidateBatch without the rule = %v; want nil", err)
		}
		if err := core.ValidateBatch(ctx, store, batch, noForbidden); core.RuleOf(err) != "plugin-mode" {
			t.Fatalf("ValidateBatch with the rule = %v; want plugin-mode", err)
		}
		must(0, h.Close(ctx))
	})
}

var (
	queueList  = storage.ConversationList[string]("plugin.queue", storage.Sticky)
	costRows   = storage.SessionList[map[string]int]("plugin.cost")
	costTotals = storage.SessionValue[int]("plugin.cost.total")
)

func TestWatchedStateIsWhatTheRegistrationNames(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		watched := core.Watched{Inbox: queueList.Address, UsageRows: costRows.Address, UsageTotals: costTotals.Address}
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), Watched: watched, CheckInvariants: true}))
		c := h.Root()
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Append(queueList.Address, "queued before"); return nil }))
		r := simtest.StartWatch(t, ctx, h, c.ID, nil)
		var sessionEvents []core.SessionEvent
		sw := must(h.WatchSession(ctx))
		sw.Start(ctx, func(e core.SessionEvent) { sessionEvents = append(sessionEvents, e) })
		if len(r.W.View().Inbox) != 1 {
			t.Fatalf("captured inbox = %v; want the registered list's element", r.W.View().Inbox)
		}
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Append(queueList.Address, "queued after"); return nil }))
		must(h.Commit(ctx, func(tx *core.Tx) error { core.TxList(tx, costRows).Append(map[string]int{"cost": 2}); return nil }))
		must(h.Commit(ctx, func(tx *core.Tx) error {
			core.TxList(tx, costRows).Append(map[string]int{"cost": 3})
			core.TxValue(tx, costTotals).Set(3)
			return nil
		}))
		simtest.CaughtUp(ctx, s, r, h.Store().LastSeq())
		for i := 0; i < 1000 && sw.View().ReadAt < h.Store().LastSeq(); i++ {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		if simtest.CountType(r.Events, core.EventInbox) != 1 || len(r.W.View().Inbox) != 2 {
			t.Fatalf("inbox events %d, folded inbox %v; want one event and both elements", simtest.CountType(r.Events, core.EventInbox), r.W.View().Inbox)
		}
		var usage []core.SessionEvent
		for _, e := range sessionEvents {
			if e.Type == core.SessionEventUsage {
				usage = append(usage, e)
			}
		}
		totalsKey := costTotals.String()
		if len(usage) != 2 || string(usage[0].Row) != `{"cost":2}` || usage[0].Totals != nil ||
			string(usage[1].Totals) != "3" || usage[1].Addr != totalsKey {
			t.Fatalf("usage events = %+v; want a row without totals, then a row with totals 3 under %s", usage, totalsKey)
		}
		if string(sw.View().Values[totalsKey]) != "3" {
			t.Fatalf("session view values = %v; want the registered totals", sw.View().Values)
		}
		fresh := must(h.WatchSession(ctx))
		if diff := cmp.Diff(fresh.View().Values, sw.View().Values); diff != "" {
			t.Fatalf("session values (-capture +folded):\n%s", diff)
		}

		bare := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime()}))
		must(bare.Root().Commit(ctx, func(tx *core.ConversationTx) error { tx.Append(queueList.Address, "x"); return nil }))
		if v := must(bare.Watch(ctx, bare.Root().ID, core.WatchOptions{})).View(); len(v.Inbox) != 0 {
			t.Fatalf("an unregistered list shows as the inbox: %v", v.Inbox)
		}
		must(0, bare.Close(ctx))
		must(0, h.Close(ctx))
	})
}

func TestConversationAbortComposesIntoTheAbortCommit(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("work", nil)
		var got []storage.ID
		refuse := false
		opts := core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{kind}, CheckInvariants: true,
			ConversationAbort: func(tx *core.Tx, convs []storage.ID) error {
				if refuse {
					return errors.New("the plugin refuses")
				}
				got = slices.Clone(convs)
				core.TxValue(tx, storage.SessionValue[int]("aborts")).Set(len(convs))
				return nil
			}}
		h := must(core.Open(ctx, memory.New(), opts))
		root := h.Root()
		var owner, child, childTask storage.ID
		must(root.Commit(ctx, func(tx *core.ConversationTx) error {
			owner = tx.Task(kind, core.TaskSpec{})
			child = tx.CreateConversation(core.ConversationSpec{Owner: owner})
			childTask = tx.Tx.Task(kind, core.TaskSpec{ConversationID: child})
			return nil
		}))
		refuse = true
		last := h.Store().LastSeq()
		if err := root.Abort(ctx); err == nil || h.Store().LastSeq() != last {
			t.Fatalf("abort with a refusing composition = %v; want its error and no marks", err)
		}
		refuse = false
		must(0, root.Abort(ctx))
		r := must(h.Store().GetTasks(ctx, []storage.ID{owner, childTask}))
		if !slices.Equal(got, []storage.ID{root.ID, child}) || !r[owner].Abort || !r[childTask].Abort || h.Store().LastSeq() != last+3 {
			t.Fatalf("composition saw %v, marks %v %v, %d writes; want [%d %d], both marked, and the value in the same commit",
				got, r[owner].Abort, r[childTask].Abort, h.Store().LastSeq()-last, root.ID, child)
		}
		must(0, h.Close(ctx))
	})
}

type extensionKey struct{}

func TestAKindFindsItsSessionsExtensionAndReports(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var found any
		var inv core.Invocation
		var invOK bool
		var self *core.Harness
		kind := simtest.StepKind("ext", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			self = rt.Harness()
			found = rt.Harness().Extension(extensionKey{})
			inv, invOK = core.InvocationOf(ctx)
			rt.Report(&core.HookError{Kind: "ext", Point: "p", Task: task.ID, Err: errors.New("reported, not fatal")})
			return nil
		})
		var reports []error
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{kind}, CheckInvariants: true,
			Extensions: map[any]any{extensionKey{}: "models and tools"},
			Report:     func(err error) { reports = append(reports, err) }}))
		var sessionEvents []core.SessionEvent
		sw := must(h.WatchSession(ctx))
		sw.Start(ctx, func(e core.SessionEvent) { sessionEvents = append(sessionEvents, e) })
		if _, ok := core.InvocationOf(ctx); ok {
			t.Fatal("the host's ctx carries an invocation")
		}
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		for i := 0; i < 1000 && len(sessionEvents) == 0; i++ {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		if self != h || found != "models and tools" || h.Extension("nobody") != nil {
			t.Fatalf("harness %v, extension %v; want this harness and its extension", self == h, found)
		}
		if !invOK || inv != (core.Invocation{Task: id, ConversationID: h.Root().ID, Method: core.MethodExecute}) {
			t.Fatalf("invocation = %+v, %v; want task %d's execute", inv, invOK, id)
		}
		i := slices.IndexFunc(sessionEvents, func(e core.SessionEvent) bool { return e.Type == core.SessionEventReport })
		if len(reports) != 1 || i < 0 || sessionEvents[i].Task != id || sessionEvents[i].Kind != "ext" || sessionEvents[i].Method != "p" {
			t.Fatalf("reports %v, session events %+v; want one report naming task %d", reports, sessionEvents, id)
		}
		if simtest.Status(t, ctx, h, id) != "done" {
			t.Fatal("a report failed the task")
		}
		must(0, h.Close(ctx))
	})
}

func TestRunHookChainFoldsEachOutcomeIntoTheNextInput(t *testing.T) {
	type in struct{ Seen []string }
	type out struct{ Name string }
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var final in
		var errs []string
		point := "chain"
		kind := simtest.StepKind("chained", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			var err error
			final, err = core.RunHookChain(ctx, rt, kind, point, in{}, func(cur in, o out, ok bool, err error) in {
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case ok:
					cur.Seen = append(slices.Clone(cur.Seen), o.Name)
				default:
					cur.Seen = append(slices.Clone(cur.Seen), "-")
				}
				return cur
			})
			if err != nil {
				return err
			}
			_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		on := func(fn func(ctx context.Context, v in) (any, error)) {
			h.Hooks().On(kind, point, core.Hook(fn), core.HookOptions{})
		}
		on(func(_ context.Context, v in) (any, error) { return out{Name: "a" + string(rune('0'+len(v.Seen)))}, nil })
		on(func(_ context.Context, v in) (any, error) {
			return &out{Name: "b" + string(rune('0'+len(v.Seen)))}, nil
		})
		on(func(context.Context, in) (any, error) { return nil, nil })
		on(func(context.Context, in) (any, error) { return "not an out", nil })
		on(func(context.Context, in) (any, error) { return nil, errors.New("handler failed") })
		on(func(context.Context, in) (any, error) { panic("handler panicked") })
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		if diff := cmp.Diff([]string{"a0", "b1", "-"}, final.Seen); diff != "" {
			t.Fatalf("chain (-want +got):\n%s", diff)
		}
		if len(errs) != 3 || errs[1] != "handler failed" {
			t.Fatalf("errors = %q; want the wrong type, the failure and the panic", errs)
		}
		if _, _, err := core.HookResult[out](core.HookOutcome{Output: (*out)(nil)}); err != nil {
			t.Fatalf("a nil *O = %v; want nothing to say", err)
		}
		must(0, h.Close(ctx))
	})
}

func TestTxDoorsSeeThePlanTheDriverAndTheForegroundSet(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("work", nil)
		h := open(t, ctx, s, nil, kind)
		c := h.Root()
		var pending, committed storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			committed = core.AppendUser(tx.Tx, tx.ID, ai.UserText("before", 0))
			return nil
		}))
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			pending = core.AppendUser(tx.Tx, tx.ID, ai.UserText("now", 0))
			e, ok := tx.PendingEntry(pending)
			if !ok || e.Model[0].Content.TextOf() != "now" {
				t.Errorf("pending entry = %v, %v; want the entry this plan appended", e, ok)
			}
			if _, ok := tx.PendingEntry(committed); ok {
				t.Error("a committed entry reads as pending")
			}
			if tx.Busy(tx.ID) {
				t.Error("an idle conversation is busy")
			}
			return nil
		}))
		var bg storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			bg = tx.Task(kind, core.TaskSpec{Background: true})
			return nil
		}))
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			if tx.Busy(tx.ID) {
				t.Error("a background task makes its conversation busy")
			}
			return nil
		}))
		fg := simtest.CreateTask(t, ctx, c, kind, core.TaskSpec{})
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			if !tx.Busy(tx.ID) {
				t.Error("a conversation with a live foreground task is idle")
			}
			if convs := tx.MarkForeground(tx.ID); !slices.Equal(convs, []storage.ID{c.ID}) {
				t.Errorf("marked set = %v; want [%d]", convs, c.ID)
			}
			return nil
		}))
		tasks := must(h.GetTasks(ctx, []storage.ID{bg, fg}))
		if tasks[bg].Abort || !tasks[fg].Abort {
			t.Fatalf("marks: background %v, foreground %v; want only the foreground task marked", tasks[bg].Abort, tasks[fg].Abort)
		}
		if c.Harness() != h {
			t.Fatal("the handle's harness is another one")
		}
		must(0, h.Close(ctx))
	})
}

func TestCheckDriveRejectsATaskDrivingItsOwnScopeBeforeAnythingHappens(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var selfErr, otherErr error
		var other *core.Conversation
		kind := simtest.StepKind("driver", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			own := must(rt.Conversation(ctx, task.ConversationID))
			selfErr = own.CheckDrive(ctx)
			otherErr = other.CheckDrive(ctx)
			return nil
		})
		h := open(t, ctx, s, nil, kind)
		var otherID storage.ID
		must(h.Commit(ctx, func(tx *core.Tx) error { otherID = tx.CreateConversation(core.ConversationSpec{}); return nil }))
		other = must(h.Conversation(ctx, otherID))
		if err := h.Root().CheckDrive(ctx); err != nil {
			t.Fatalf("the host's check = %v; want nil", err)
		}
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		var sw *core.SelfWaitError
		if !errors.As(selfErr, &sw) || otherErr != nil {
			t.Fatalf("own scope %v, another conversation %v; want a SelfWaitError and nil", selfErr, otherErr)
		}
		must(0, h.Close(ctx))
	})
}

func TestRejectfMarshalAndListAllAreTheLinesOwn(t *testing.T) {
	err := error(core.Rejectf("plugin-rule", 7, "value %d is odd", 3))
	var ce *core.CommitError
	if !errors.As(err, &ce) || core.RuleOf(err) != "plugin-rule" || ce.ID != 7 || ce.Detail != "value 3 is odd" {
		t.Fatalf("Rejectf = %#v; want the rule, the id and the detail", err)
	}
	if got := string(must(core.Marshal(json.RawMessage("{ \"a\" : \"<b>\" }")))); got != `{"a":"<b>"}` {
		t.Fatalf("Marshal(raw) = %s; want it compacted as written", got)
	}
	if _, err := core.Marshal(json.RawMessage("{nope")); err == nil {
		t.Fatal("invalid raw JSON was marshalled")
	}
	if got := string(must(core.Marshal(map[string]int{"n": 1}))); got != `{"n":1}` {
		t.Fatalf("Marshal(map) = %s", got)
	}

	f := newFixture(t)
	conv := f.conversation()
	list := queueList.In(conv)
	const n = storage.PageLimitMax + 3 // more than one page
	f.commit(func(tx *core.Tx) {
		for i := range n {
			core.TxList(tx, list).Append(string(rune('a' + i%26)))
		}
	})
	var all []core.Elem[string]
	f.commit(func(tx *core.Tx) {
		all = must(core.TxList(tx, list).All())
		core.TxList(tx, list).Remove(all[0].ID)
	})
	if len(all) != n || all[n-1].Value != string(rune('a'+(n-1)%26)) || all[0].ID >= all[1].ID {
		t.Fatalf("All read %d elements; want %d in element order", len(all), n)
	}
	f.commit(func(tx *core.Tx) { all = must(core.TxList(tx, list).All()) })
	if len(all) != n-1 {
		t.Fatalf("after a removal All read %d; want %d", len(all), n-1)
	}
}

func TestFoldSectionsAndToolsAreTheSystemEntrysMerge(t *testing.T) {
	text := func(s string) *string { return &s }
	got := core.FoldSections([]core.SystemSection{{Key: "a", Text: text("1")}, {Key: "b", Text: text("2")}},
		[]core.SystemSection{{Key: "b", Text: text("3")}, {Key: "a"}, {Key: "c", Text: text("4")}, {Key: "zz"}})
	if diff := cmp.Diff([]core.SystemSection{{Key: "b", Text: text("3")}, {Key: "c", Text: text("4")}}, got); diff != "" {
		t.Fatalf("sections (-want +got):\n%s", diff)
	}
	tools := core.FoldTools([]ai.Tool{{Name: "read"}, {Name: "edit", Description: "old"}},
		[]ai.Tool{{Name: "read"}}, []ai.Tool{{Name: "edit", Description: "new"}, {Name: "bash"}})
	if diff := cmp.Diff([]ai.Tool{{Name: "edit", Description: "new"}, {Name: "bash"}}, tools); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
}

func TestTheCachedContextDoorsOfABareLineDeriveAfresh(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.user(conv, "one")
	f.assistant(conv, "two")
	want := f.context(conv, 0)
	wantRequest := must(want.Request())
	f.commit(func(tx *core.Tx) {
		c := must(tx.DerivedContext(conv))
		fold := must(tx.SystemFold(conv))
		req := must(tx.RequestMessages(conv, nil))
		if !slices.Equal(c.IDs(), want.IDs()) || fold.Baseline != nil || !cmp.Equal(req, wantRequest) {
			t.Errorf("bare-line doors: context %v, baseline %v, request %d messages; want %v, none, %d", c.IDs(), fold.Baseline, len(req), want.IDs(), len(wantRequest))
		}
		if tx.Busy(conv) || !slices.Equal(tx.MarkForeground(conv), []storage.ID{conv}) {
			t.Error("a bare line sees live work")
		}
		tx.SetValue(storage.SessionValue[int]("touched").Address, 1)
	})
}

// LiveTasks is the driver's index of live work by conversation and kind:
// it follows creation and settlement, and a bare line answers the same
// from the store.
func TestLiveTasksListsAConversationsLiveTasksOfAKind(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a, b := simtest.StepKind("a", nil), simtest.StepKind("b", nil)
		store := memory.New()
		h := open(t, ctx, s, store, a, b)
		c := h.Root()
		var a1, a2, other storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			a1 = tx.Task(a, core.TaskSpec{})
			tx.Task(b, core.TaskSpec{})
			a2 = tx.Task(a, core.TaskSpec{Background: true})
			return nil
		}))
		fork := must(c.Fork(ctx, core.ForkStart, core.ForkOptions{}))
		must(fork.Commit(ctx, func(tx *core.ConversationTx) error { other = tx.Task(a, core.TaskSpec{}); return nil }))
		live := func(conv storage.ID, kind string) []storage.ID {
			var ids []storage.ID
			must(h.Commit(ctx, func(tx *core.Tx) error {
				var err error
				ids, err = tx.LiveTasks(conv, kind)
				return err
			}))
			return ids
		}
		if got := live(c.ID, "a"); !slices.Equal(got, []storage.ID{a1, a2}) {
			t.Fatalf("live a in the root = %v; want [%d %d]", got, a1, a2)
		}
		if got := live(fork.ID, "a"); !slices.Equal(got, []storage.ID{other}) {
			t.Fatalf("live a in the fork = %v; want [%d]", got, other)
		}
		if got := live(c.ID, "nope"); len(got) != 0 {
			t.Fatalf("live tasks of an unknown kind = %v; want none", got)
		}
		// The drive runs the root's foreground work: a1 settles and leaves
		// the index in that commit.
		must(c.Drive(ctx))
		afterDrive := live(c.ID, "a")
		if slices.Contains(afterDrive, a1) || !slices.Equal(afterDrive, live(c.ID, "a")) {
			t.Fatalf("live a after the drive = %v; want %d gone", afterDrive, a1)
		}
		kinds := core.NewKinds()
		must(0, kinds.AddTask(a))
		must(0, kinds.AddTask(b))
		line := core.NewLine(s.Runtime(), store, kinds, core.LineOptions{})
		var bare []storage.ID
		must(line.Commit(ctx, func(tx *core.Tx) error {
			var err error
			bare, err = tx.LiveTasks(c.ID, "a")
			return err
		}))
		if !slices.Equal(bare, afterDrive) {
			t.Fatalf("a bare line's live a = %v; want %v, what the driver's index said", bare, afterDrive)
		}
		must(0, h.Close(ctx))
	})
}

// WaitForTask reports true once its target is terminal and false when its
// budget runs out first; a wait whose ctx ends (here the waiter's abort
// mark) returns at once; a wait for itself is refused. Every way out
// removes the task waiter exactly once.
func TestWaitForTaskEndsByTargetBudgetOrCtxAndUnregistersOnce(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		sleeper := simtest.StepKind("sleeper", func(ctx context.Context, _ *storage.Task, rt *core.TaskRuntime) error {
			return rt.Sleep(ctx, rt.Now().Add(time.Second))
		})
		type waitState struct {
			Target storage.ID    `json:"target"`
			Budget time.Duration `json:"budget"`
		}
		outcomes := map[storage.ID]string{}
		var h *core.Harness
		waiter := simtest.StepKind("waiter", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			var st waitState
			if len(task.State) > 0 {
				must(0, json.Unmarshal(task.State, &st))
			}
			if st.Target == 0 {
				st.Target = task.ID
			}
			done, err := trt.WaitForTask(ctx, st.Target, st.Budget)
			var self *core.SelfWaitError
			switch {
			case errors.As(err, &self):
				outcomes[task.ID] = "self"
			case err != nil:
				outcomes[task.ID] = "ctx"
				return err
			default:
				outcomes[task.ID] = fmt.Sprint(done)
			}
			return nil
		})
		h = open(t, ctx, s, memory.New(), sleeper, waiter)
		c := h.Root()
		var target, within, short, cancelled, self storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			target = tx.Task(sleeper, core.TaskSpec{Background: true})
			within = tx.Task(waiter, core.TaskSpec{State: waitState{Target: target, Budget: 2 * time.Second}})
			short = tx.Task(waiter, core.TaskSpec{State: waitState{Target: target, Budget: 100 * time.Millisecond}})
			cancelled = tx.Task(waiter, core.TaskSpec{State: waitState{Target: target}})
			self = tx.Task(waiter, core.TaskSpec{})
			return nil
		}))
		simtest.DriveInActor(ctx, s, c, nil)
		must(0, rt.Sleep(ctx, 10*time.Millisecond))
		if st := must(h.Stats(ctx)); st.TaskWaiters != 3 {
			t.Fatalf("task waiters while waiting = %d; want 3", st.TaskWaiters)
		}
		must(0, h.AbortTask(ctx, cancelled))
		must(0, rt.Sleep(ctx, 200*time.Millisecond))
		if st := must(h.Stats(ctx)); st.TaskWaiters != 1 {
			t.Fatalf("task waiters after a budget ran out and a waiter was marked = %d; want 1", st.TaskWaiters)
		}
		must(0, rt.Sleep(ctx, 2*time.Second))
		want := map[storage.ID]string{within: "true", short: "false", cancelled: "ctx", self: "self"}
		if diff := cmp.Diff(want, outcomes); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
		if st := must(h.Stats(ctx)); st.TaskWaiters != 0 {
			t.Fatalf("task waiters at the end = %d; want 0", st.TaskWaiters)
		}
		must(0, h.Close(ctx))
	})
}

// A wait for a task that has already ended reports true at once, with no
// budget to end it otherwise, and leaves no waiter behind.
func TestWaitForATerminalTaskEndsAtOnce(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		quick := simtest.StepKind("quick", nil)
		var target storage.ID
		var done bool
		var waitErr error
		waiter := simtest.StepKind("waiter", func(ctx context.Context, _ *storage.Task, trt *core.TaskRuntime) error {
			done, waitErr = trt.WaitForTask(ctx, target, 0)
			return waitErr
		})
		h := open(t, ctx, s, memory.New(), quick, waiter)
		c := h.Root()
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { target = tx.Task(quick, core.TaskSpec{}); return nil }))
		if got, err := c.Drive(ctx); err != nil || got != core.Idle {
			t.Fatalf("drive = %s, %v; want idle", got, err)
		}
		if st := simtest.Status(t, ctx, h, target); st != "done" {
			t.Fatalf("the target is %s; want done before the wait", st)
		}
		start := s.Runtime().Now()
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(waiter, core.TaskSpec{}); return nil }))
		if got, err := c.Drive(ctx); err != nil || got != core.Idle {
			t.Fatalf("drive = %s, %v; want idle", got, err)
		}
		if !done || waitErr != nil || s.Runtime().Now() != start {
			t.Fatalf("the wait = %t, %v after %s; want true at once", done, waitErr, s.Runtime().Now().Sub(start))
		}
		if st := must(h.Stats(ctx)); st.TaskWaiters != 0 {
			t.Fatalf("task waiters = %d; want 0", st.TaskWaiters)
		}
		must(0, h.Close(ctx))
	})
}

// OnInvocation sees every method start and return, in order, on the
// method's own actor: an execute that a mark stops returns before the
// fresh abort starts.
func TestOnInvocationObservesEveryMethodStartAndReturn(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var seen []string
		waiting := s.Runtime().NewEvent("waiting")
		k := simtest.StepKind("k", func(ctx context.Context, _ *storage.Task, rt *core.TaskRuntime) error {
			waiting.Set()
			return rt.Sleep(ctx, rt.Now().Add(time.Hour))
		})
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{k}, CheckInvariants: true,
			OnInvocation: func(inv core.Invocation, returned bool) {
				seen = append(seen, fmt.Sprintf("%d %s %v", inv.Task, inv.Method, returned))
			}}))
		c := h.Root()
		var id storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { id = tx.Task(k, core.TaskSpec{}); return nil }))
		simtest.DriveInActor(ctx, s, c, nil)
		must(0, waiting.Wait(ctx))
		must(0, h.AbortTask(ctx, id))
		must(c.Drive(ctx))
		want := []string{fmt.Sprintf("%d execute false", id), fmt.Sprintf("%d execute true", id), fmt.Sprintf("%d abort false", id), fmt.Sprintf("%d abort true", id)}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Fatalf("observed (-want +got):\n%s", diff)
		}
		must(0, h.Close(ctx))
	})
}

// Tx.Entries reads a conversation's committed transcript on the line: a
// fork sees its source's prefix, and the plan's own entries are not there.
func TestTxEntriesReadsTheCommittedTranscript(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		c := h.Root()
		var first storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			first = tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"n": 1}})
			tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"n": 2}})
			return nil
		}))
		fork := must(c.Fork(ctx, first, core.ForkOptions{}))
		var root, forked []storage.ID
		must(h.Commit(ctx, func(tx *core.Tx) error {
			tx.Entry(core.NoticeKind, c.ID, core.EntryDraft{Data: map[string]int{"n": 3}})
			for conv, out := range map[storage.ID]*[]storage.ID{c.ID: &root, fork.ID: &forked} {
				page, err := tx.Entries(conv, storage.Cursor{Limit: 10})
				if err != nil {
					return err
				}
				for _, e := range page.Items {
					*out = append(*out, e.ID)
				}
			}
			return nil
		}))
		if len(root) != 2 || !slices.Equal(forked, []storage.ID{first}) {
			t.Fatalf("root %v, fork %v; want the two committed entries, and the fork's prefix", root, forked)
		}
		must(0, h.Close(ctx))
	})
}

// selfWriting is a payload that writes its own JSON, unlike what
// encoding/json would write of it, so a test can see which was used.
type selfWriting struct {
	Text string `json:"text"`
	err  error
}

func (s selfWriting) AppendJSON(buf []byte) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	return append(jsonvalue.AppendString(append(buf, `{"self":`...), s.Text), '}'), nil
}

// Marshal takes a JSONAppender's bytes as they are, asks json.Marshal when
// it fails, and still refuses invalid UTF-8 in it; a stream frame, the
// one in the tree, is json.Marshal's bytes whichever frame it is, nil and
// failures included.
func TestMarshalLetsAJSONAppenderWriteItself(t *testing.T) {
	if got := string(must(core.Marshal(selfWriting{Text: "<é>"}))); got != `{"self":"\u003cé\u003e"}` {
		t.Fatalf("Marshal(JSONAppender) = %s; want its own bytes", got)
	}
	// An appender that fails leaves the payload to json.Marshal.
	if got, err := core.Marshal(selfWriting{Text: "t", err: errors.New("boom")}); err != nil || string(got) != `{"text":"t"}` {
		t.Fatalf("Marshal of a failing JSONAppender = %s, %v; want what json.Marshal writes", got, err)
	}
	if _, err := core.Marshal(selfWriting{Text: "bad \xff"}); core.RuleOf(err) != core.RuleInvalidUTF8 {
		t.Fatalf("Marshal of a JSONAppender with invalid UTF-8 = %v; want %s", err, core.RuleInvalidUTF8)
	}
	for _, f := range []ai.Frame{
		{Type: ai.FrameTextDelta, ContentIndex: 1, Delta: "<hi>"},
		{Type: ai.FrameStart, Partial: &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(), Timestamp: 1}},
	} {
		want := must(json.Marshal(f))
		if got := must(core.Marshal(f)); string(got) != string(want) {
			t.Errorf("Marshal(%v) = %s; json.Marshal writes %s", f.Type, got, want)
		}
	}
	// A nil pointer to an appender is null, as json.Marshal writes it.
	if got := string(must(core.Marshal((*ai.Frame)(nil)))); got != "null" {
		t.Errorf("Marshal of a nil *Frame = %s; want null", got)
	}
	// A failure is json.Marshal's, error and all.
	for _, f := range []ai.Frame{
		{Type: ai.FrameToolCallEnd, Arguments: json.RawMessage(`{"a":`)},
		{Type: ai.FrameStart, Partial: &ai.Message{Usage: &ai.Usage{Cost: ai.Cost{Total: math.NaN()}}}},
	} {
		_, want := json.Marshal(f)
		_, err := core.Marshal(f)
		if want == nil || err == nil || err.Error() != want.Error() {
			t.Errorf("Marshal(%v) failed with %v; json.Marshal with %v", f.Type, err, want)
		}
	}
}

// selfReading is a payload that reads its own JSON: a JSON string whose
// text starts with self: it takes, reading it as encoding/json would not;
// any other text it writes into and gives up on.
type selfReading struct {
	Text string `json:"text"`
	N    int    `json:"n"`
}

func (s *selfReading) DecodeJSON(data []byte) bool {
	if text, ok := strings.CutPrefix(string(data), `"self:`); ok {
		s.Text = "read by hand: " + text
		return true
	}
	s.Text, s.N = "left over", 99 // what a fast path read before it gave up
	return false
}

var selfReadingValue = storage.SessionValue[selfReading]("plugin.self")

// Unmarshal takes what a JSONDecoder reads, and else decodes with
// encoding/json from a zero value, value and error; the typed values'
// reads go through it.
func TestUnmarshalLetsAJSONDecoderReadItself(t *testing.T) {
	if got, err := core.Unmarshal[selfReading]([]byte(`"self:x"`)); err != nil || got.Text != `read by hand: x"` {
		t.Fatalf("Unmarshal of a text the decoder takes = %+v, %v; want what it read", got, err)
	}
	if got, err := core.Unmarshal[selfReading]([]byte(`{"text":"t"}`)); err != nil || got != (selfReading{Text: "t"}) {
		t.Fatalf("Unmarshal of a text the decoder gives up on = %+v, %v; want encoding/json's, from zero", got, err)
	}
	want := json.Unmarshal([]byte(`{"n":"x"}`), &selfReading{})
	if _, err := core.Unmarshal[selfReading]([]byte(`{"n":"x"}`)); want == nil || err == nil || err.Error() != want.Error() {
		t.Fatalf("Unmarshal failed with %v; json.Unmarshal with %v", err, want)
	}
	if got, err := core.Unmarshal[int]([]byte(`7`)); err != nil || got != 7 {
		t.Fatalf("Unmarshal[int] = %d, %v", got, err)
	}
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		must(h.Commit(ctx, func(tx *core.Tx) error {
			tx.SetValue(selfReadingValue.Address, json.RawMessage(`{"text":"stored","n":1}`))
			return nil
		}))
		must(h.Commit(ctx, func(tx *core.Tx) error {
			got, ok, err := core.TxValue(tx, selfReadingValue).Get(0)
			if err != nil || !ok || got != (selfReading{Text: "stored", N: 1}) {
				t.Errorf("ValueTx.Get = %+v, %t, %v; want encoding/json's reading of the stored text", got, ok, err)
			}
			tx.SetValue(selfReadingValue.Address, "self:y")
			return nil
		}))
		must(h.Commit(ctx, func(tx *core.Tx) error {
			got, ok, err := core.TxValue(tx, selfReadingValue).Get(0)
			if err != nil || !ok || got.Text != `read by hand: y"` {
				t.Errorf("ValueTx.Get = %+v, %t, %v; want the decoder's reading", got, ok, err)
			}
			return nil
		}))
		must(0, h.Close(ctx))
	})
}

// Empty lists in a draft or a task spec are written as none, as a stored
// record reads them back after a reopen; storage would refuse them empty.
func TestEmptyListsAreWrittenAsNone(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("k", func(context.Context, *storage.Task, *core.TaskRuntime) error { return nil })
		h := open(t, ctx, s, nil, kind)
		var entry, edited, task storage.ID
		must(h.Commit(ctx, func(tx *core.Tx) error {
			entry = tx.Entry(core.UserKind, 1, core.EntryDraft{Model: []ai.Message{}, Edits: []storage.ContextEdit{}})
			edited = tx.Entry(core.UserKind, 1, core.EntryDraft{Model: []ai.Message{ai.UserText("x", 1)},
				Edits: []storage.ContextEdit{{Target: entry, Action: storage.EditOmit, Messages: []ai.Message{}}}})
			task = tx.Task(kind, core.TaskSpec{ConversationID: 1, After: []storage.ID{}, Owns: []storage.ID{}})
			return nil
		}))
		es := must(h.Store().GetEntries(ctx, []storage.ID{entry, edited}))
		ts := must(h.Store().GetTasks(ctx, []storage.ID{task}))
		if e := es[entry]; e == nil || e.Model != nil || e.Edits != nil {
			t.Errorf("entry with empty lists = %+v; want none stored", e)
		}
		if e := es[edited]; e == nil || len(e.Edits) != 1 || e.Edits[0].Messages != nil {
			t.Errorf("edit with empty messages = %+v; want the edit without messages", e)
		}
		if tk := ts[task]; tk == nil || tk.After != nil || tk.Owns != nil {
			t.Errorf("task with empty lists = %+v; want none stored", tk)
		}
		must(0, h.Close(ctx))
	})
}

// Under SetCheckJSON a hand-written codec that parts from encoding/json
// panics with the "json" invariant, naming its type; one that agrees, and
// either when the check is off, goes through as before.
func TestCheckJSONHoldsHandWrittenCodecsToEncodingJSON(t *testing.T) {
	invariant := func(what string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			var ie *core.DriverInvariantError
			if r := recover(); r == nil {
				t.Errorf("%s: no panic; want the json invariant", what)
			} else if err, ok := r.(error); !ok || !errors.As(err, &ie) || ie.Invariant != "json" || !strings.Contains(ie.Detail, "selfWriting") && !strings.Contains(ie.Detail, "selfReading") {
				t.Errorf("%s: panicked with %v; want the json invariant naming the type", what, r)
			}
		}()
		f()
	}
	core.SetCheckJSON(true)
	defer core.SetCheckJSON(false)
	invariant("Marshal", func() { _, _ = core.Marshal(selfWriting{Text: "x"}) })
	invariant("Unmarshal", func() { _, _ = core.Unmarshal[selfReading]([]byte(`"self:x"`)) })
	// Codecs that agree pass, and a text the decoder gives up on is
	// encoding/json's alone.
	if got := string(must(core.Marshal(ai.Frame{Type: ai.FrameTextDelta, Delta: "<hi>"}))); !strings.Contains(got, `\u003chi\u003e`) {
		t.Errorf("Marshal of a frame under the check = %s", got)
	}
	u := ai.Usage{Input: 3, Output: 4, TotalTokens: 7}
	if got, err := core.Unmarshal[ai.Usage](must(json.Marshal(u))); err != nil || got != u {
		t.Errorf("Unmarshal of a usage under the check = %+v, %v; want %+v", got, err, u)
	}
	if got, err := core.Unmarshal[selfReading]([]byte(`{"text":"t"}`)); err != nil || got != (selfReading{Text: "t"}) {
		t.Errorf("Unmarshal of a text the decoder gives up on = %+v, %v", got, err)
	}
	core.SetCheckJSON(false)
	if got := string(must(core.Marshal(selfWriting{Text: "x"}))); got != `{"self":"x"}` {
		t.Errorf("Marshal with the check off = %s; want the appender's bytes", got)
	}
}

func TestValueAsWrittenReadsTheCommitsOwnWritesBeforeCommittedState(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), CheckInvariants: true}))
		c := h.Root()
		addr := forbidden.In(c.ID).Address
		other := storage.ConversationValue[string]("plugin.other", storage.Sticky).In(c.ID).Address
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.SetValue(forbidden.Address, "committed"); return nil }))
		read := func(tx *core.Tx, a storage.Address) string {
			t.Helper()
			v, ok, err := tx.ValueAsWritten(a)
			if err != nil {
				t.Fatalf("ValueAsWritten(%s) = %v", a, err)
			}
			if !ok {
				return "absent"
			}
			return string(v)
		}
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			steps := []struct{ did, want string }{{"nothing", `"committed"`}}
			got := []string{read(tx.Tx, addr)}
			tx.SetValue(forbidden.Address, "first")
			tx.SetValue(forbidden.Address, "second")
			steps, got = append(steps, struct{ did, want string }{"two sets", `"second"`}), append(got, read(tx.Tx, addr))
			tx.DeleteValue(forbidden.Address)
			steps, got = append(steps, struct{ did, want string }{"a delete after them", "absent"}), append(got, read(tx.Tx, addr))
			tx.SetValue(other, "elsewhere")
			steps, got = append(steps, struct{ did, want string }{"a set of another address", "absent"}), append(got, read(tx.Tx, addr))
			for i, s := range steps {
				if got[i] != s.want {
					t.Errorf("after %s: ValueAsWritten = %s; want %s", s.did, got[i], s.want)
				}
			}
			if v, ok, _ := tx.GetValue(addr, 0); !ok || string(v.Value) != `"committed"` {
				t.Errorf("GetValue in the commit = %s, %v; want the committed value still", v.Value, ok)
			}
			return nil
		}))
		// A commit's very first write is its own too.
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.SetValue(forbidden.Address, "only")
			if got := read(tx.Tx, addr); got != `"only"` {
				t.Errorf("after the commit's first write: ValueAsWritten = %s; want \"only\"", got)
			}
			return nil
		}))
	})
}
